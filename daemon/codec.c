/* codec.c - the codec table (see codec.h). */
#include "codec.h"

#include <stddef.h>

static const gcd_codec *const table[] = { &gcd_codec_rle, &gcd_codec_bzip2 };

const gcd_codec *gcd_codec_find(Gpucomp__Codec id)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i]->id == id)
            return table[i];
    return NULL;
}

const gcd_codec *const *gcd_codec_all(unsigned *n)
{
    *n = sizeof table / sizeof table[0];
    return table;
}

unsigned gcd_codec_option_slot(const gcd_codec *codec, unsigned i)
{
    unsigned slot = 0;
    for (size_t k = 0; k < sizeof table / sizeof table[0] && table[k] != codec; k++)
        slot += table[k]->n_options;
    return slot + i;
}
