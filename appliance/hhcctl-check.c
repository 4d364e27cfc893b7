/* hhcctl check: verify a cache device and its log mirrors without
 * changing them (the log's part of the report is in hhcctl-check-log.c).
 */
#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <string.h>

#include "hhcctl.h"

/* What to check. */
struct check_args {
  const char *cache;
  const char *logs[HHC_MAX_LOGS];
  unsigned nlogs;
};

static const char *
state_to_string (enum cache_state st)
{
  switch (st)
    {
    case CACHE_CLOSED:
      return "closed cleanly";
    case CACHE_IN_USE_WB:
      return "in use or not closed cleanly (wb: clean blocks are kept)";
    case CACHE_IN_USE_HHC:
      return "in use or not closed cleanly (hhc: the next start redoes the "
             "log into the cache)";
    case CACHE_IN_USE:
    default:
      return "in use or not closed cleanly (pt/wt: clean blocks are dropped "
             "at the next start)";
    }
}

/* The problems the census found in the metadata. */
static void
report_metadata (const char *path, const struct offline_cache *cc)
{
  if (cc->bad_pages)
    problem ("cache %s: %u metadata pages have no valid copy (the first is "
             "page %u): the gateway refuses to load the cache",
             path, cc->bad_pages, cc->first_bad);
  if (cc->late_state)
    problem ("cache %s: the state page's sequence %" PRIu64
             " is past 2^61: the gateway refuses to load the cache",
             path, cc->late_state);
  if (cc->late_pages)
    problem ("cache %s: %u metadata pages have a commit sequence past 2^61 "
             "(the first is page %u): the gateway refuses to load the cache",
             path, cc->late_pages, cc->first_late);
  if (cc->beyond)
    problem ("cache %s: %" PRIu64 " metadata entries name blocks beyond the "
             "volume (the first: block %" PRIu64
             "): the gateway refuses to load the cache",
             path, cc->beyond, cc->first_beyond);
  if (cc->dups && cc->state == CACHE_CLOSED)
    problem ("cache %s: %" PRIu64 " blocks are in more than one slot, in a "
             "cache that was closed cleanly",
             path, cc->dups);
  else if (cc->dups)
    warning ("cache %s: %" PRIu64 " blocks are in more than one slot (a "
             "crash during a commit): the next start keeps the newer entry",
             path, cc->dups);
}

/* check: report on the cache. */
static void
report_cache (const char *path, const struct offline_cache *cc)
{
  const struct cache_super *sb = &cc->sb;
  char u[37], l[37];

  if (cc->blank)
    {
      note ("cache %s: blank (no HHC cache: the gateway formats it at the "
            "next start)",
            path);
      return;
    }
  offline_uuid_str (sb->uuid, u);
  offline_uuid_str (sb->log_uuid, l);
  note ("cache %s: superblock ok: version %d, uuid %s, log %s", path,
        CACHE_VERSION, u, l);
  note ("cache %s: volume \"%s\", %" PRIu64 " bytes; %u slots of %u bytes",
        path, sb->identity, sb->volume_size, sb->nslots, sb->block_size);
  note ("cache %s: %s", path, state_to_string (cc->state));
  note ("cache %s: %u metadata pages: %" PRIu64 " dirty, %" PRIu64
        " clean blocks",
        path, sb->npages, cc->dirty, cc->clean);
  report_metadata (path, cc);
}

/* Open the cache read-only and report on it; true if its census was
 * read (*cc filled).
 */
static bool
check_cache (const char *path, struct offline_cache *cc)
{
  struct hhc_dev *dev;
  bool busy;
  int r;

  if (offline_open_readonly (path, msg_cb, &dev, &busy) != 0)
    return false;
  if (busy)
    warning ("cache %s is in use by a running gateway: read anyway, the "
             "results may be stale or inconsistent",
             path);
  r = offline_cache_read (dev, msg_cb, cc);
  if (r == 0)
    report_cache (path, cc);
  else if (r != EINVAL) /* EINVAL: the core said why */
    problem ("cache %s: %s", path, strerror (r));
  offline_close (dev);
  return r == 0;
}

/* Open every log mirror read-only; false (said why) if one fails. */
static bool
open_logs (struct offline_logset *ls)
{
  bool busy;

  for (unsigned i = 0; i < ls->n; i++)
    {
      if (offline_open_readonly (ls->paths[i], msg_cb, &ls->devs[i], &busy)
          != 0)
        return false;
      if (busy)
        warning ("log %s is in use by a running gateway: read anyway, the "
                 "results may be stale or inconsistent",
                 ls->paths[i]);
    }
  return true;
}

static void
check_usage (FILE *f)
{
  fprintf (f, "usage: hhcctl check --cache PATH [--log PATH...]\n"
              "       hhcctl check --log PATH [--log PATH...]\n"
              "Verify a cache device and its log mirrors without changing "
              "them.\n"
              "Exit status: 0 healthy, 1 a problem was found, 2 usage.\n"
              "See hhcctl(8).\n");
}

/* The command line into a; -1 to go on, else the exit status. */
static int
check_args (int argc, char **argv, struct check_args *a)
{
  static const struct option opts[] = {
    { "cache", required_argument, NULL, 'c' },
    { "log", required_argument, NULL, 'l' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  int c;

  while ((c = getopt_long (argc, argv, ":c:l:h", opts, NULL)) != -1)
    switch (c)
      {
      case 'c':
        if (a->cache)
          return usage_error ("--cache may be given once");
        a->cache = optarg;
        break;
      case 'l':
        if (add_log (a->logs, &a->nlogs, optarg))
          return 2;
        break;
      case 'h':
        check_usage (stdout);
        return 0;
      default:
        return bad_option (c, argv);
      }
  if (optind != argc)
    return usage_error ("unexpected argument '%s'", argv[optind]);
  if (a->cache == NULL && a->nlogs == 0)
    return usage_error ("give --cache PATH, --log PATH, or both");
  return -1;
}

/* The last line, and the exit status. */
static int
summary (const struct report *rep)
{
  if (rep->problems)
    printf ("check: %u problem%s found, %u warning%s\n", rep->problems,
            rep->problems == 1 ? "" : "s", rep->warnings,
            rep->warnings == 1 ? "" : "s");
  else
    printf ("check: healthy (%u warning%s)\n", rep->warnings,
            rep->warnings == 1 ? "" : "s");
  return rep->problems ? 1 : 0;
}

int
cmd_check (int argc, char **argv)
{
  struct check_args a = { 0 };
  struct offline_logset ls = { .paths = a.logs };
  struct report rep = { 0 };
  struct offline_cache cc;
  bool have_cache = false;
  int r = check_args (argc, argv, &a);

  if (r >= 0)
    return r;
  ls.n = a.nlogs;
  report = &rep;
  if (a.cache)
    have_cache = check_cache (a.cache, &cc);
  if (ls.n > 0 && open_logs (&ls))
    {
      if (logset_open (&ls) == 0)
        report_log (&ls, have_cache ? &cc : NULL, a.cache);
    }
  else if (ls.n == 0 && have_cache && !cc.blank
           && memcmp (cc.sb.log_uuid, (uint8_t[16]){ 0 }, 16) != 0)
    note ("the cache is paired with a log (mode hhc): give it with --log to "
          "check it too");
  offline_logset_close (&ls);
  report = NULL;
  return summary (&rep);
}
