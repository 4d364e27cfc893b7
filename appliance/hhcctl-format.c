/* hhcctl format: make a cache device and log mirrors blank, so that
 * the next gateway start formats them.  It refuses a cache with dirty
 * blocks or a log with data to replay unless --force.
 */
#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <string.h>

#include "hhcctl.h"

/* What to format, and the devices once open. */
struct format_job {
  const char *cache;
  const char *logs[HHC_MAX_LOGS];
  bool force;
  struct hhc_dev *cdev;
  struct offline_logset ls;
  bool cblank; /* the cache is blank already */
};

static void
format_usage (FILE *f)
{
  fprintf (f, "usage: hhcctl format [--cache PATH] [--log PATH...] [--force]\n"
              "Make the devices blank: the next gateway start formats "
              "them.\n"
              "Refuses a cache with dirty blocks or a log with data to "
              "replay unless --force.\n"
              "See hhcctl(8).\n");
}

/* Zero len bytes at 0 and sync. */
static int
zero_head (struct hhc_dev *dev, const char *path, size_t len)
{
  int r = offline_blank (dev, len);

  if (r)
    fprintf (stderr, "hhcctl: error: %s: writing: %s\n", path, strerror (r));
  return r;
}

/* May the cache be made blank?  0 yes, 1 refused (why in why). */
static int
format_check_cache (const char *path, struct hhc_dev *dev, bool force,
                    bool *blank, char *why, size_t len)
{
  struct offline_cache cc;
  int r = offline_cache_read (dev, msg_cb, &cc);

  *blank = r == 0 && cc.blank;
  if (r && !force)
    {
      snprintf (why, len,
                "%s: cannot tell whether the cache holds dirty "
                "blocks (%s): refusing to format it without --force",
                path, r == EINVAL ? "corrupt" : strerror (r));
      return 1;
    }
  if (r == 0 && !cc.blank && (cc.dirty || cc.bad_pages) && !force)
    {
      snprintf (why, len,
                "%s holds %" PRIu64
                " dirty blocks not yet written back to the backend%s: "
                "refusing to format it without --force",
                path, cc.dirty,
                cc.bad_pages ? " (and unreadable metadata pages)" : "");
      return 1;
    }
  if (r == 0 && !cc.blank && cc.dirty)
    fprintf (stderr,
             "hhcctl: warning: %s: discarding %" PRIu64
             " dirty blocks (--force)\n",
             path, cc.dirty);
  return 0;
}

/* May the log be made blank?  0 yes, 1 refused (why in why). */
static int
format_check_log (struct offline_logset *ls, bool force, char *why, size_t len)
{
  uint64_t blocks = 0;
  int r = logset_open (ls);

  if (r == 0 && ls->log)
    r = replay_count (ls->log, &blocks);
  if (r && !force)
    {
      snprintf (why, len,
                "%s: cannot tell whether the log holds data to "
                "replay (%s): refusing to format it without --force",
                ls->paths[0], strerror (r));
      return 1;
    }
  if (blocks && !force)
    {
      snprintf (why, len,
                "the log on %s holds %" PRIu64
                " blocks not yet written back (a replay would write them to "
                "the backend): refusing to format it without --force",
                ls->paths[0], blocks);
      return 1;
    }
  if (blocks)
    fprintf (stderr,
             "hhcctl: warning: the log on %s: discarding %" PRIu64
             " blocks (--force)\n",
             ls->paths[0], blocks);
  offline_logset_close_log (ls);
  return 0;
}

/* The command line into j; -1 to go on, else the exit status. */
static int
format_args (int argc, char **argv, struct format_job *j)
{
  static const struct option opts[] = {
    { "cache", required_argument, NULL, 'c' },
    { "log", required_argument, NULL, 'l' },
    { "force", no_argument, NULL, 'f' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  int c;

  while ((c = getopt_long (argc, argv, ":c:l:fh", opts, NULL)) != -1)
    switch (c)
      {
      case 'c':
        if (j->cache)
          return usage_error ("--cache may be given once");
        j->cache = optarg;
        break;
      case 'l':
        if (add_log (j->logs, &j->ls.n, optarg))
          return 2;
        break;
      case 'f':
        j->force = true;
        break;
      case 'h':
        format_usage (stdout);
        return 0;
      default:
        return bad_option (c, argv);
      }
  if (optind != argc)
    return usage_error ("unexpected argument '%s'", argv[optind]);
  if (j->cache == NULL && j->ls.n == 0)
    return usage_error ("give --cache PATH, --log PATH, or both");
  return -1;
}

/* Open everything (locked: not while a gateway runs) and decide:
 * 0 to go on, 1 refused (why in why, or said already when it is "").
 */
static int
format_open (struct format_job *j, char *why, size_t len)
{
  why[0] = '\0';
  if (j->cache && offline_open (j->cache, msg_cb, &j->cdev) != 0)
    return 1;
  for (unsigned i = 0; i < j->ls.n; i++)
    if (offline_open (j->logs[i], msg_cb, &j->ls.devs[i]) != 0)
      return 1;
  if (j->cdev
      && format_check_cache (j->cache, j->cdev, j->force, &j->cblank, why, len))
    return 1;
  if (j->ls.n && format_check_log (&j->ls, j->force, why, len))
    return 1;
  return 0;
}

/* Only then write: 0 done, 1 a write failed.  The logs first: a power
 * cut in the middle may leave a cache next to a blank log (its dirty
 * blocks go to the log again at the next start), never a blank cache
 * next to its old log (which the next start would replay over the
 * backend).
 */
static int
format_write (struct format_job *j)
{
  for (unsigned i = 0; i < j->ls.n; i++)
    {
      int r = j->ls.blank[i] ? 0 : offline_log_blank (j->ls.devs[i]);
      if (r)
        {
          fprintf (stderr, "hhcctl: error: %s: writing: %s\n", j->logs[i],
                   strerror (r));
          return 1;
        }
      printf (j->ls.blank[i] ? "log %s: already blank\n"
                             : "log %s: blank (the next start formats it)\n",
              j->logs[i]);
    }
  if (j->cdev)
    {
      if (j->cblank)
        printf ("cache %s: already blank\n", j->cache);
      else if (zero_head (j->cdev, j->cache, OFFLINE_CACHE_HEAD))
        return 1;
      else
        printf ("cache %s: blank (the next start formats it)\n", j->cache);
    }
  if (j->cdev && j->ls.n == 0)
    printf ("note: a log paired with this cache is replayed into the backend "
            "at the next start; format it too to discard its data\n");
  return 0;
}

int
hhcctl_written_back (const char *cache, char *const *logs, unsigned nlogs,
                     char *why, size_t len)
{
  struct format_job j = { .ls.paths = j.logs, .cache = cache };
  int r;

  for (unsigned i = 0; i < nlogs && i < HHC_MAX_LOGS; i++)
    j.logs[j.ls.n++] = logs[i];
  r = format_open (&j, why, len);
  if (r && why[0] == '\0')
    snprintf (why, len, "%s: cannot be opened", cache);
  offline_logset_close (&j.ls);
  offline_close (j.cdev);
  return r;
}

int
cmd_format (int argc, char **argv)
{
  struct format_job j = { .ls.paths = j.logs };
  int r = format_args (argc, argv, &j);

  if (r >= 0)
    return r;
  char why[512];
  r = format_open (&j, why, sizeof why);
  if (r && why[0])
    fprintf (stderr, "hhcctl: error: %s\n", why);
  if (r == 0)
    r = format_write (&j);
  offline_logset_close (&j.ls);
  offline_close (j.cdev);
  return r;
}
