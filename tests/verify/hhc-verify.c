/* hhc-verify: a verifying workload for crash and fault campaigns.
 *
 *   hhc-verify write URI JOURNAL [options]
 *   hhc-verify check URI JOURNAL [--state-out STATE]
 *
 * write: WRITERS connections (one thread and one libnbd handle each)
 * write blocks of BS bytes whose content names the block's LBA, the
 * writer, the writer's sequence number and the run, filled with bytes
 * derived from them and closed by a crc32c.  Writer w owns the LBAs
 * with lba % WRITERS == w, so each LBA has one writer and its writes
 * have one order.  Every FLUSH_EVERY writes a writer sends an NBD FLUSH;
 * every FUA_EVERY-th write carries FUA; with --zero-every N every N-th
 * write is an NBD WRITE_ZEROES of the block instead (its content: all
 * zeros).  The run ends after OPS writes per writer, after SECONDS, or
 * when the server goes away (the crash the campaign caused: with
 * --expect-crash that is no error).  A request that fails while the
 * connection stays up ends the run too, unless --tolerate-errors: then
 * a failed write counts as not completed, a failed FLUSH covers
 * nothing (it is no acknowledgement: the writes before it are not
 * promised by it), and the writer goes on.  Then JOURNAL records, per
 * writer, every write issued (LBA, sequence number, whether it
 * completed and with FUA; zeros as 'z' lines) and the last sequence
 * number covered by a successful flush.  With --state STATE the blocks
 * a previous check accepted are the base line.
 *
 * check: reads every block of the journal's region and checks it:
 *   - a write that completed before a successful FLUSH of its writer,
 *     or completed with FUA, must be there, or a later write of the
 *     same LBA (completed or not: a write in flight may land);
 *   - without such a write, the block holds the base line (zeros, or
 *     the state's block) or any write of this run to that LBA;
 *   - a zeros write is there when the block reads as zeros;
 *   - a block must never hold content that was not written to its LBA,
 *     nor fail its checksum.
 * It prints one line per bad block (at most 20) and a summary, sends a
 * FLUSH (what it read becomes the base line of the next round), writes
 * the accepted contents to --state-out, and exits 1 if any block was
 * lost or corrupt.
 *
 * Flush semantics assumed: an NBD FLUSH covers the writes of the same
 * connection that completed before it was sent (a writer's writes are
 * synchronous, so all its earlier ones).
 *
 * This file holds the options, the block format and the connection;
 * the write command (the writers, the journal) is hhc-verify-write.c,
 * the check hhc-verify-check.c, what they share hhc-verify.h.
 */
#include <config.h>

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libnbd.h>

#include "common.h" /* put32, put64 */
#include "crc32c.h"
#include "hhc-verify.h"

const char *uri;
unsigned nwriters = 4;
uint32_t bs = 4096;
uint64_t nblocks;
uint64_t ops = 1000;
unsigned seconds = 0;
unsigned flush_every = 16;
unsigned fua_every = 0;
unsigned zero_every = 0;
bool tolerate_errors;
uint64_t seed = 1;
uint64_t run;
bool expect_crash;
const char *ready_file; /* made once every writer is connected */
struct base *bases;     /* nblocks */

uint64_t
mix (uint64_t x)
{
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

/* The content of write (run, writer, seq) of LBA. */
void
make_block (unsigned char *b, uint64_t lba, uint32_t writer, uint64_t seq,
            uint64_t r)
{
  uint64_t x = mix (lba ^ mix (seq ^ mix (r + writer)));
  unsigned char t[8];
  uint32_t i;

  memcpy (b, MAGIC, 8);
  put64 (b + 8, lba);
  put64 (b + 16, writer);
  put64 (b + 24, seq);
  put64 (b + 32, r);
  /* Every byte up to the crc: bs - 4 - HDR is 4 more than a multiple of
   * 8, and a tail left as it was would be whatever malloc gave this
   * buffer (the writer's and the checker's differ: every block fails).
   */
  for (i = HDR; i < bs - 4; i += 8)
    {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      put64 (t, x);
      memcpy (b + i, t, HHC_MIN (8u, bs - 4 - i));
    }
  put32 (b + bs - 4, crc32c (0, b, bs - 4));
}

struct nbd_handle *
connect_or_die (void)
{
  struct nbd_handle *h = nbd_create ();

  if (h == NULL || nbd_connect_uri (h, uri) == -1)
    {
      fprintf (stderr, "hhc-verify: %s: %s\n", uri, nbd_get_error ());
      exit (2);
    }
  return h;
}

static void
usage (void)
{
  fprintf (stderr,
           "usage: hhc-verify write URI JOURNAL [--writers N] [--bs BYTES]\n"
           "         [--blocks N] [--ops N] [--seconds S] [--flush-every N]\n"
           "         [--fua-every N] [--zero-every N] [--seed N]\n"
           "         [--state STATE] [--expect-crash] [--tolerate-errors]\n"
           "         [--ready FILE]\n"
           "       hhc-verify check URI JOURNAL [--state-out STATE]\n");
  exit (2);
}

/* The long options (there are no short ones). */
static const struct option lopts[] = {
  { "writers", 1, NULL, 'w' },
  { "bs", 1, NULL, 'b' },
  { "blocks", 1, NULL, 'n' },
  { "ops", 1, NULL, 'o' },
  { "seconds", 1, NULL, 's' },
  { "flush-every", 1, NULL, 'f' },
  { "fua-every", 1, NULL, 'F' },
  { "zero-every", 1, NULL, 'z' },
  { "tolerate-errors", 0, NULL, 'E' },
  { "seed", 1, NULL, 'S' },
  { "state", 1, NULL, 't' },
  { "state-out", 1, NULL, 'T' },
  { "expect-crash", 0, NULL, 'x' },
  { "ready", 1, NULL, 'r' },
  { NULL, 0, NULL, 0 },
};

/* Option C, as getopt_long returns it with optarg: into the options, or
 * --state and --state-out into *STATE and *STATE_OUT; anything else is
 * a usage error.
 */
static void
set_option (int c, const char **state, const char **state_out)
{
  switch (c)
    {
    case 'w':
      nwriters = strtoul (optarg, NULL, 0);
      break;
    case 'b':
      bs = strtoul (optarg, NULL, 0);
      break;
    case 'n':
      nblocks = strtoull (optarg, NULL, 0);
      break;
    case 'o':
      ops = strtoull (optarg, NULL, 0);
      break;
    case 's':
      seconds = strtoul (optarg, NULL, 0);
      break;
    case 'f':
      flush_every = strtoul (optarg, NULL, 0);
      break;
    case 'F':
      fua_every = strtoul (optarg, NULL, 0);
      break;
    case 'z':
      zero_every = strtoul (optarg, NULL, 0);
      break;
    case 'E':
      tolerate_errors = true;
      break;
    case 'S':
      seed = strtoull (optarg, NULL, 0);
      break;
    case 't':
      *state = optarg;
      break;
    case 'T':
      *state_out = optarg;
      break;
    case 'x':
      expect_crash = true;
      break;
    case 'r':
      ready_file = optarg;
      break;
    default:
      usage ();
    }
}

int
main (int argc, char *argv[])
{
  const char *state = NULL, *state_out = NULL;
  int c;

  while ((c = getopt_long (argc, argv, "", lopts, NULL)) != -1)
    set_option (c, &state, &state_out);
  if (argc - optind != 3 || nwriters == 0 || nwriters > 256 || bs < 512
      || bs % 512)
    usage ();
  uri = argv[optind + 1];
  if (strcmp (argv[optind], "write") == 0)
    return do_write (argv[optind + 2], state);
  if (strcmp (argv[optind], "check") == 0)
    return do_check (argv[optind + 2], state_out);
  usage ();
}
