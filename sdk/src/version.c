/* version.c - colibri_version: the version of the library itself. */
#include "colibri.h"

uint32_t colibri_version(void)
{
    return (uint32_t)COLIBRI_VERSION_NUMBER;
}
