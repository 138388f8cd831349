/*
 * check.h - the C test programs' one assertion: CHECK(cond) counts a pass or
 * prints the failing line, and CHECK_SUMMARY() prints the closing
 * "N passed, M failed" line and gives main's exit code.
 */
#ifndef COLIBRI_TEST_CHECK_H
#define COLIBRI_TEST_CHECK_H

#include <stdio.h>

static int passed, failed;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (cond) {                                                                                \
            passed++;                                                                              \
        } else {                                                                                   \
            failed++;                                                                              \
            printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                                 \
        }                                                                                          \
    } while (0)

#define CHECK_SUMMARY() (printf("%d passed, %d failed\n", passed, failed), failed == 0 ? 0 : 1)

#endif
