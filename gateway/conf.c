/* The configuration: defaults (hhc_conf_init) and the names of modes
 * and formats.  Public (hhccore.h); depends on nothing else of the core.
 */
#include <config.h>

#include <errno.h>
#include <string.h>

#include "hhccore.h"

const char *
hhc_mode_to_string (enum hhc_mode mode)
{
  static const char *const names[] = { "pt", "wt", "wb", "wbflush", "hhc" };
  return mode <= HHC_MODE_HHC ? names[mode] : "?";
}

int
hhc_mode_from_string (const char *s, enum hhc_mode *mode)
{
  for (int m = HHC_MODE_PT; m <= HHC_MODE_HHC; m++)
    if (strcmp (s, hhc_mode_to_string (m)) == 0)
      {
        *mode = m;
        return 0;
      }
  return EINVAL;
}

const char *
hhc_format_to_string (enum hhc_format f)
{
  static const char *const names[] = { "auto", "force", "never" };
  return f <= HHC_FORMAT_NEVER ? names[f] : "?";
}

int
hhc_format_from_string (const char *s, enum hhc_format *f)
{
  for (int i = HHC_FORMAT_AUTO; i <= HHC_FORMAT_NEVER; i++)
    if (strcmp (s, hhc_format_to_string (i)) == 0)
      {
        *f = i;
        return 0;
      }
  return EINVAL;
}

void
hhc_conf_init (struct hhc_conf *conf)
{
  memset (conf, 0, sizeof *conf);
  conf->mode = HHC_MODE_WB;
  conf->block_size = 0; /* 4096, or what the cache was formatted with */
  conf->dirty_low = 20;
  conf->dirty_high = 60;
  conf->dirty_max = 95;
  conf->hot_ratio = 2;
  conf->format = HHC_FORMAT_AUTO;
  conf->writeback_threads = 4;
  conf->idle_ms = 1000;
  conf->promote = HHC_PROMOTE_ALWAYS;
  conf->promote_hits = 2;
  conf->promote_window = 0; /* the cache's slots */
}
