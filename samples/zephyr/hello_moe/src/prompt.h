/*
 * prompt.h - token ids from a comma-separated Kconfig string ("1,2,3").
 */
#ifndef HELLO_MOE_PROMPT_H
#define HELLO_MOE_PROMPT_H

#include <stdint.h>

/* Parse text into ids[0 .. max-1]. Returns the number of ids, or -1 if the
 * text is empty, has something other than digits, commas and spaces, holds
 * more than max ids, or an id >= vocab_size. */
int prompt_parse(const char *text, int32_t *ids, uint32_t max, uint32_t vocab_size);

#endif
