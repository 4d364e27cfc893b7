/* hhcctl's commands for a running gateway: status and drain.  They
 * find the volumes in the gateway's run directory (RUN/exports, the
 * front's map: "NAME SOCKET" per line) and talk to each volume's hhc
 * filter through its control socket RUN/NAME.ctl.
 */
#include <config.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "control-client.h"
#include "hhcctl-live.h"

#define DEFAULT_RUN_DIR "/run/hhc"

/* The volume names of RUN/exports, NULL-terminated (malloc'd). */
static char **
read_names (const char *run_dir)
{
  char *path, *line = NULL, **names = NULL;
  size_t cap = 0, n = 0;
  FILE *f;

  if (asprintf (&path, "%s/exports", run_dir) == -1)
    return NULL;
  f = fopen (path, "r");
  if (f == NULL)
    {
      fprintf (stderr,
               "hhcctl: %s: %m (is hhc-gateway running with "
               "run_dir %s?)\n",
               path, run_dir);
      free (path);
      return NULL;
    }
  free (path);
  while (getline (&line, &cap, f) != -1)
    {
      char **nn = realloc (names, (n + 2) * sizeof *names);
      if (nn == NULL)
        break;
      names = nn;
      line[strcspn (line, " \n")] = '\0';
      names[n++] = strdup (line);
      names[n] = NULL;
    }
  free (line);
  fclose (f);
  if (names == NULL)
    names = calloc (1, sizeof *names);
  return names;
}

static void
free_names (char **names)
{
  for (size_t i = 0; names && names[i]; i++)
    free (names[i]);
  free (names);
}

static char *
ctl_path (const char *run_dir, const char *name)
{
  char *p;

  return asprintf (&p, "%s/%s.ctl", run_dir, name) == -1 ? NULL : p;
}

static json_int_t
num (json_t *o, const char *key)
{
  return json_integer_value (json_object_get (o, key));
}

static void
print_row (const char *name, json_t *st)
{
  json_t *log = json_object_get (st, "log");
  json_int_t hits = num (st, "read_hits"), miss = num (st, "read_misses");
  char hit[16] = "-", logu[16] = "-", mirrors[16] = "-";

  if (hits + miss > 0)
    snprintf (hit, sizeof hit, "%.1f%%", 100.0 * hits / (hits + miss));
  if (log && num (log, "region_bytes") > 0)
    {
      snprintf (logu, sizeof logu, "%.1f%%",
                100.0 * num (log, "used_bytes") / num (log, "region_bytes"));
      snprintf (mirrors, sizeof mirrors, "%lld/%lld",
                (long long)(num (log, "mirrors") - num (log, "mirrors_failed")),
                (long long)num (log, "mirrors"));
    }
  printf ("%-16s %-8s %-8s %10lld %10lld %8s %7s %7s\n", name, "running",
          json_string_value (json_object_get (st, "mode")),
          (long long)num (st, "slots"), (long long)num (st, "dirty"), hit, logu,
          mirrors);
}

int
hhcctl_status (int argc, char **argv)
{
  static const struct option opts[] = {
    { "run-dir", required_argument, NULL, 'r' },
    { "json", no_argument, NULL, 'j' },
    { NULL, 0, NULL, 0 },
  };
  const char *run_dir = DEFAULT_RUN_DIR;
  bool as_json = false;
  int c, bad = 0;
  char **names;
  json_t *all = json_array ();

  optind = 1;
  while ((c = getopt_long (argc, argv, "", opts, NULL)) != -1)
    switch (c)
      {
      case 'r':
        run_dir = optarg;
        break;
      case 'j':
        as_json = true;
        break;
      default:
        fprintf (stderr, "usage: hhcctl status [--run-dir DIR] [--json]\n");
        return 2;
      }
  if ((names = read_names (run_dir)) == NULL)
    return 1;
  if (!as_json)
    printf ("%-16s %-8s %-8s %10s %10s %8s %7s %7s\n", "VOLUME", "STATE",
            "MODE", "SLOTS", "DIRTY", "HITS", "LOG", "MIRRORS");
  for (size_t i = 0; names[i]; i++)
    {
      char *ctl = ctl_path (run_dir, names[i]);
      char *text = ctl ? control_stats (ctl, NULL, 0) : NULL;
      json_t *st = text ? json_loads (text, 0, NULL) : NULL;
      if (st == NULL)
        bad = 1;
      if (as_json)
        json_array_append_new (all,
                               json_pack ("{s:s,s:s,s:o}", "name", names[i],
                                          "state", st ? "running" : "down",
                                          "stats", st ? st : json_null ()));
      else if (st)
        print_row (names[i], st);
      else
        printf ("%-16s %-8s\n", names[i], "down");
      if (!as_json)
        json_decref (st);
      free (text);
      free (ctl);
    }
  if (as_json)
    {
      char *s = json_dumps (all, JSON_INDENT (2));
      puts (s ? s : "[]");
      free (s);
    }
  json_decref (all);
  free_names (names);
  return bad;
}

struct bar {
  bool tty;
  uint64_t first, last;
};

static void
drain_progress (void *opaque, uint64_t dirty)
{
  struct bar *b = opaque;

  if (b->first == UINT64_MAX)
    b->first = dirty;
  if (dirty == b->last)
    return;
  b->last = dirty;
  unsigned pct
      = b->first ? (b->first - HHC_MIN_U64 (dirty, b->first)) * 100 / b->first
                 : 100;
  if (b->tty)
    {
      char fill[41];
      memset (fill, '#', pct * 40 / 100);
      memset (fill + pct * 40 / 100, ' ', 40 - pct * 40 / 100);
      fill[40] = '\0';
      fprintf (stderr, "\rdraining [%s] %3u%% %llu dirty", fill, pct,
               (unsigned long long)dirty);
    }
  else
    fprintf (stderr, "draining: %llu dirty blocks\n",
             (unsigned long long)dirty);
}

int
hhcctl_drain (int argc, char **argv)
{
  static const struct option opts[] = {
    { "run-dir", required_argument, NULL, 'r' },
    { "quiet", no_argument, NULL, 'q' },
    { NULL, 0, NULL, 0 },
  };
  const char *run_dir = DEFAULT_RUN_DIR;
  bool quiet = false;
  struct bar b = { .tty = isatty (2), .first = UINT64_MAX, .last = UINT64_MAX };
  char err[256], *ctl;
  int c, r;

  optind = 1;
  while ((c = getopt_long (argc, argv, "q", opts, NULL)) != -1)
    switch (c)
      {
      case 'r':
        run_dir = optarg;
        break;
      case 'q':
        quiet = true;
        break;
      default:
        goto usage;
      }
  if (optind != argc - 1)
    goto usage;
  if ((ctl = ctl_path (run_dir, argv[optind])) == NULL)
    return 1;
  if (access (ctl, F_OK) == -1)
    {
      fprintf (stderr, "hhcctl: drain: no volume %s in %s (%s: %m)\n",
               argv[optind], run_dir, ctl);
      free (ctl);
      return 1;
    }
  r = control_drain (ctl, quiet ? NULL : drain_progress, &b, err, sizeof err);
  free (ctl);
  if (b.tty && !quiet && b.first != UINT64_MAX)
    fputc ('\n', stderr);
  if (r == -1)
    {
      fprintf (stderr, "hhcctl: drain %s: %s\n", argv[optind], err);
      return 1;
    }
  if (!quiet)
    fprintf (stderr, "hhcctl: %s: drained, no dirty block left\n",
             argv[optind]);
  return 0;
usage:
  fprintf (stderr, "usage: hhcctl drain [--run-dir DIR] [--quiet] VOLUME\n");
  return 2;
}
