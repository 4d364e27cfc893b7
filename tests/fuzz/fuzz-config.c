/* Fuzz target: gw_config_parse (appliance/config.c), the appliance's
 * configuration file and the position scanner behind its messages.
 *
 * Why: an operator's hand-written JSON is the one input of
 * hhc-gateway, and every error must be one line naming the file, line
 * and column, never a crash, a read outside the text or a leak (also
 * on the paths that fail half-way).
 *
 * What: the input is the file's text (a NUL is appended), parsed
 * without looking at the file system.  Checks beyond the sanitizers':
 * a refusal gives a message that starts with "FILE:LINE:COL: " (or
 * "FILE:" for an error jansson cannot place); what is accepted has at
 * least one volume, each with a name and a cache.
 */
#include <config.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gwconfig.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  char *text = malloc (size + 1), err[512];
  struct gw_config cfg;

  if (text == NULL)
    abort ();
  memcpy (text, data, size);
  text[size] = '\0';
  if (gw_config_parse ("fuzz.json", text, false, &cfg, err, sizeof err) == 0)
    {
      if (cfg.nvolumes == 0)
        abort ();
      for (size_t i = 0; i < cfg.nvolumes; i++)
        if (cfg.volumes[i].name == NULL || cfg.volumes[i].cache == NULL)
          abort ();
      gw_config_free (&cfg);
    }
  else if (strncmp (err, "fuzz.json:", 10) != 0
           || memchr (err, '\0', sizeof err) == NULL)
    {
      fprintf (stderr, "fuzz-config: bad message: %.100s\n", err);
      abort ();
    }
  free (text);
  return 0;
}
