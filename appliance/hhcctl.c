/* hhcctl: the gateway's admin tool.  For now one command:
 *
 *   hhcctl recover --log PATH [--log PATH...] --backend PATH|NBD-URI
 *
 * replays the HDD log into the backend offline (the SSD cache is lost
 * or elsewhere), with a progress bar, then flushes the backend.  Same
 * rules as the gateway's own replay at start-up: the sequence chain
 * from the head hint, checksums, the last complete barrier, revokes,
 * last writer wins.
 */
#include <config.h>

#include <getopt.h>
#include <stdio.h>
#include <unistd.h>

#include "common.h"
#include "dev.h"
#include "log.h"

static bool quiet;

static void
log_cb (enum hhc_log_level level, const char *msg)
{
  if (level == HHC_LOG_DEBUG || (quiet && level == HHC_LOG_INFO))
    return;
  fprintf (stderr, "hhcctl: %s%s\n", level == HHC_LOG_ERROR ? "error: " : "",
           msg);
}

struct target {
  struct hhc_dev *dev;
  uint64_t size;
  uint32_t bs;
  bool tty;
  unsigned last;
};

static int
write_block (void *opaque, const void *buf, uint64_t lba)
{
  struct target *t = opaque;
  uint64_t off = lba * t->bs;
  size_t len = HHC_MIN ((uint64_t)t->bs, t->size - off);

  return dev_pwrite (t->dev, buf, len, off);
}

static void
progress (void *opaque, uint64_t done, uint64_t total)
{
  struct target *t = opaque;
  unsigned pct = total ? done * 100 / total : 100;

  if (quiet)
    return;
  if (t->tty)
    {
      char bar[41];
      unsigned fill = pct * 40 / 100;
      memset (bar, '#', fill);
      memset (bar + fill, ' ', 40 - fill);
      bar[40] = '\0';
      fprintf (stderr, "\rreplaying [%s] %3u%% %" PRIu64 "/%" PRIu64, bar, pct,
               done, total);
      if (done == total)
        fputc ('\n', stderr);
    }
  else if (pct / 10 != t->last / 10 || done == total)
    fprintf (stderr, "replaying: %u%% (%" PRIu64 " of %" PRIu64 " blocks)\n",
             pct, done, total);
  t->last = pct;
}

static void
usage (FILE *f)
{
  fprintf (f, "usage: hhcctl recover --log PATH [--log PATH...] --backend "
              "PATH|NBD-URI [--quiet]\n"
              "Replay the HHC gateway's HDD log into the backend (offline).\n"
              "See hhcctl(1).\n");
}

static int
recover (int argc, char **argv)
{
  static const struct option opts[] = {
    { "log", required_argument, NULL, 'l' },
    { "backend", required_argument, NULL, 'b' },
    { "quiet", no_argument, NULL, 'q' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  const char *logs[HHC_MAX_LOGS];
  const char *backend = NULL, *identity;
  unsigned nlogs = 0;
  struct hhc_log *log = NULL;
  enum log_found found;
  struct target t = { 0 };
  uint8_t zero[16] = { 0 };
  int c, r;

  while ((c = getopt_long (argc, argv, "l:b:qh", opts, NULL)) != -1)
    switch (c)
      {
      case 'l':
        if (nlogs == HHC_MAX_LOGS)
          {
            fprintf (stderr, "hhcctl: --log may be given at most %d times\n",
                     HHC_MAX_LOGS);
            return 2;
          }
        logs[nlogs++] = optarg;
        break;
      case 'b':
        backend = optarg;
        break;
      case 'q':
        quiet = true;
        break;
      case 'h':
        usage (stdout);
        return 0;
      default:
        usage (stderr);
        return 2;
      }
  if (nlogs == 0 || backend == NULL || optind != argc)
    {
      usage (stderr);
      return 2;
    }
  struct log_conf lc = {
    .paths = logs,
    .npaths = nlogs,
    .block_size = 512,
    .log = log_cb,
  };
  if ((r = log_open (&lc, zero, &log, &found)) != 0)
    return 1;
  log_volume (log, &identity, &t.size, &t.bs);
  if ((r = dev_open_path (backend, 0, false, log_cb, &t.dev)) != 0)
    {
      log_close (log);
      return 1;
    }
  if (t.dev->size < t.size)
    {
      fprintf (stderr,
               "hhcctl: error: %s has %" PRIu64
               " bytes, but the log is of a volume of %" PRIu64
               " bytes (identity \"%s\"): refusing\n",
               backend, t.dev->size, t.size, identity);
      dev_close (t.dev);
      log_close (log);
      return 1;
    }
  if (!quiet)
    fprintf (stderr, "hhcctl: log of volume \"%s\" (%" PRIu64 " bytes)\n",
             identity, t.size);
  t.tty = isatty (2);
  r = log_replay (log, write_block, progress, &t);
  if (r == 0 && (r = dev_sync (t.dev)) != 0)
    fprintf (stderr, "hhcctl: error: flushing %s: %s\n", backend, strerror (r));
  dev_close (t.dev);
  log_close (log);
  return r ? 1 : 0;
}

int
main (int argc, char **argv)
{
  if (argc < 2 || strcmp (argv[1], "--help") == 0
      || strcmp (argv[1], "-h") == 0)
    {
      usage (argc < 2 ? stderr : stdout);
      return argc < 2 ? 2 : 0;
    }
  if (strcmp (argv[1], "recover") == 0)
    return recover (argc - 1, argv + 1);
  fprintf (stderr, "hhcctl: unknown command \"%s\"\n", argv[1]);
  usage (stderr);
  return 2;
}
