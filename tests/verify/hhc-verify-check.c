/* hhc-verify check: every block of the journal's region against the
 * journal and the base line (the rules: hhc-verify.c).
 */
#include <config.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libnbd.h>

#include "common.h" /* get64 */
#include "hhc-verify.h"

/* Per LBA in check: the writes of this run, and what must be there. */
struct lbainfo {
  uint64_t required; /* seq of the newest durable write, 0: none */
  uint64_t maxseq;   /* newest write issued */
  uint64_t *seqs;    /* all data writes issued, in order */
  size_t nseqs;
  uint64_t maxzero; /* newest zeros write issued, 0: none */
};

/* Where block LBA as read (got) differs from the block its header
 * names (want): the first and last differing byte, how many differ, and
 * 16 bytes of each from the first difference.
 */
static void
diff_block (uint64_t lba, const unsigned char *got, const unsigned char *want)
{
  uint32_t first = bs, last = 0, n = 0;

  for (uint32_t i = 0; i < bs; i++)
    if (got[i] != want[i])
      {
        if (first == bs)
          first = i;
        last = i;
        n++;
      }
  if (first == bs)
    return;
  fprintf (stderr,
           "hhc-verify: block %" PRIu64 ": %" PRIu32 " of %" PRIu32
           " bytes differ, first at %" PRIu32 ", last at %" PRIu32
           " (header lba %" PRIu64 ")\n",
           lba, n, bs, first, last, get64 (got + 8));
  for (int k = 0; k < 2; k++)
    {
      const unsigned char *p = k ? got : want;
      fprintf (stderr, "hhc-verify:   %s @%" PRIu32 ":", k ? "got " : "want",
               first);
      for (uint32_t i = first; i < first + 16 && i < bs; i++)
        fprintf (stderr, " %02x", p[i]);
      fprintf (stderr, "\n");
    }
}

/* What a block read in check holds, as its header names it (run, seq
 * and writer 0 for a block of zeros).
 */
struct found {
  uint64_t run, seq;
  uint32_t writer;
  bool zero;
};

/* What check counts: the blocks it accepts (data, zeros), the bad ones
 * (lost, corrupt), and how many of those it printed.
 */
struct tally {
  uint64_t lost, corrupt, ok, zero, printed;
};

/* Opens JOURNAL and reads its header into bs, nblocks, nwriters and
 * run: NULL (the error printed) if it cannot be read or is not a
 * journal.
 */
static FILE *
open_journal (const char *journal)
{
  FILE *f = fopen (journal, "r");
  unsigned jw;

  if (f == NULL)
    {
      perror (journal);
      return NULL;
    }
  if (fscanf (f, "hhc-verify 1 %" SCNu32 " %" SCNu64 " %u %" SCNu64 "\n", &bs,
              &nblocks, &jw, &run)
          != 4
      || jw == 0 || jw > 256 || bs < 512 || bs % 512)
    {
      fprintf (stderr, "hhc-verify: %s: not a journal\n", journal);
      return NULL;
    }
  nwriters = jw;
  return f;
}

/* A write of the journal ('w' data, 'z' zeros) into IN, the info of its
 * LBA; FLUSHED is the last seq its writer's flushes cover.
 */
static void
note_write (struct lbainfo *in, char kind, uint64_t seq, int done, int fua,
            uint64_t flushed)
{
  if (kind == 'z')
    in->maxzero = seq;
  else
    {
      in->seqs = realloc (in->seqs, (in->nseqs + 1) * sizeof *in->seqs);
      if (in->seqs == NULL)
        abort ();
      in->seqs[in->nseqs++] = seq;
    }
  in->maxseq = seq;
  if (done && (fua || seq <= flushed))
    in->required = seq;
}

/* The journal's lines after its header: the base lines into bases, the
 * flush marks and the writes into INFO.  False if a line is malformed.
 */
static bool
read_journal (FILE *f, struct lbainfo *info)
{
  uint64_t flushed[256] = { 0 };
  char kind;

  /* Two passes over the writes: flush marks come before them. */
  while (fscanf (f, " %c", &kind) == 1)
    {
      uint64_t lba, r, seq;
      uint32_t wr;
      unsigned w;
      int done, fua;
      switch (kind)
        {
        case 'b':
          if (fscanf (f, "%" SCNu64 " %" SCNu64 " %" SCNu32 " %" SCNu64, &lba,
                      &r, &wr, &seq)
                  != 4
              || lba >= nblocks)
            return false;
          bases[lba] = (struct base){
            .run = r, .seq = seq, .writer = wr, .set = true
          };
          break;
        case 'f':
          if (fscanf (f, "%u %" SCNu64, &w, &seq) != 2 || w >= nwriters)
            return false;
          flushed[w] = seq;
          break;
        case 'w':
        case 'z':
          if (fscanf (f, "%u %" SCNu64 " %" SCNu64 " %d %d", &w, &lba, &seq,
                      &done, &fua)
                  != 5
              || w >= nwriters || lba >= nblocks || lba % nwriters != w)
            return false;
          note_write (&info[lba], kind, seq, done, fua, flushed[w]);
          break;
        default:
          return false;
        }
    }
  return true;
}

/* Reads JOURNAL: its header into the options, its base lines into
 * bases, what it requires of each LBA into *INFOP.  0, or 2 (the error
 * printed).
 */
static int
load_journal (const char *journal, struct lbainfo **infop)
{
  FILE *f = open_journal (journal);
  struct lbainfo *info;

  if (f == NULL)
    return 2;
  bases = calloc (nblocks, sizeof *bases);
  info = calloc (nblocks, sizeof *info);
  if (bases == NULL || info == NULL)
    abort ();
  if (!read_journal (f, info))
    {
      fprintf (stderr, "hhc-verify: %s: malformed journal\n", journal);
      return 2;
    }
  fclose (f);
  *infop = info;
  return 0;
}

/* Why block LBA, read as zeros, breaks the rules (IN, the base line),
 * or NULL if it passes.
 */
static const char *
zeros_why (uint64_t lba, const struct lbainfo *in)
{
  /* A zeros write of this run, as new as what must be there. */
  if (in->maxzero && in->maxzero >= in->required)
    return NULL;
  if (in->required)
    return "lost: zeros where a flushed write must be";
  if (bases[lba].set)
    return "lost: zeros where the base line had data";
  return NULL;
}

/* Why data block LBA as read (B) breaks the rules (IN, the base line),
 * or NULL if it passes; what its header names goes to FD.  WANT gets
 * the block the header names; with SHOW_DIFF a corrupt block's
 * difference from it is printed.
 */
static const char *
data_why (uint64_t lba, const unsigned char *b, unsigned char *want,
          const struct lbainfo *in, bool show_diff, struct found *fd)
{
  fd->seq = get64 (b + 24);
  fd->run = get64 (b + 32);
  fd->writer = get64 (b + 16);
  make_block (want, lba, fd->writer, fd->seq, fd->run);
  if (memcmp (b, want, bs) != 0)
    {
      if (show_diff)
        diff_block (lba, b, want);
      return "corrupt: not a block written to this LBA";
    }
  if (fd->run == run)
    {
      bool issued = false;
      for (size_t k = 0; k < in->nseqs; k++)
        issued |= in->seqs[k] == fd->seq;
      if (!issued || fd->writer != lba % nwriters)
        return "corrupt: a write never issued to this LBA";
      if (fd->seq < in->required)
        return "lost: older than a flushed write";
      return NULL;
    }
  if (!bases[lba].set || bases[lba].run != fd->run || bases[lba].seq != fd->seq
      || bases[lba].writer != fd->writer)
    return "corrupt: another run's block that was not the base line";
  if (in->required)
    return "lost: the base line where a flushed write must be";
  return NULL;
}

/* Counts block LBA in T: bad (WHY), printed if among the first 20, or
 * accepted, written to SO (if any) if it holds data.
 */
static void
tally_block (uint64_t lba, const char *why, const struct found *fd,
             const struct lbainfo *in, FILE *so, struct tally *t)
{
  if (why)
    {
      if (why[0] == 'l')
        t->lost++;
      else
        t->corrupt++;
      if (t->printed++ < 20)
        fprintf (stderr,
                 "hhc-verify: block %" PRIu64 ": %s (found run %" PRIx64
                 " writer %" PRIu32 " seq %" PRIu64 "; required seq %" PRIu64
                 ", newest issued %" PRIu64 ")\n",
                 lba, why, fd->run, fd->writer, fd->seq, in->required,
                 in->maxseq);
    }
  else if (fd->zero)
    t->zero++;
  else
    {
      t->ok++;
      if (so)
        fprintf (so, "%" PRIu64 " %" PRIu64 " %" PRIu32 " %" PRIu64 "\n", lba,
                 fd->run, fd->writer, fd->seq);
    }
}

/* Reads block LBA into B and checks it against IN and the base line,
 * counting it in T (WANT: scratch, SO: the state out).  -1 (the error
 * printed) if the read fails.
 */
static int
check_block (struct nbd_handle *h, uint64_t lba, const struct lbainfo *in,
             unsigned char *b, unsigned char *want, FILE *so, struct tally *t)
{
  struct found fd = { 0 };
  const char *why;

  if (nbd_pread (h, b, bs, lba * bs, 0) == -1)
    {
      fprintf (stderr, "hhc-verify: read of block %" PRIu64 ": %s\n", lba,
               nbd_get_error ());
      return -1;
    }
  fd.zero = b[0] == 0 && memcmp (b, b + 1, bs - 1) == 0;
  if (fd.zero)
    why = zeros_why (lba, in);
  else
    why = data_why (lba, b, want, in, t->corrupt == 0, &fd);
  tally_block (lba, why, &fd, in, so, t);
  return 0;
}

/* After the last block: a FLUSH (what was read becomes the base line of
 * the next round), the state out closed, the summary printed.  0, or 2
 * (the error printed).
 */
static int
finish_check (struct nbd_handle *h, FILE *so, const char *state_out,
              const struct tally *t)
{
  if (nbd_flush (h, 0) == -1)
    {
      fprintf (stderr, "hhc-verify: flush: %s\n", nbd_get_error ());
      return 2;
    }
  nbd_shutdown (h, 0);
  nbd_close (h);
  if (so && fclose (so) != 0)
    {
      perror (state_out);
      return 2;
    }
  printf ("hhc-verify: checked %" PRIu64 " blocks: %" PRIu64 " data, %" PRIu64
          " zero, %" PRIu64 " lost, %" PRIu64 " corrupt\n",
          nblocks, t->ok, t->zero, t->lost, t->corrupt);
  return 0;
}

int
do_check (const char *journal, const char *state_out)
{
  struct lbainfo *info;
  struct nbd_handle *h;
  unsigned char *b, *want;
  struct tally t = { 0 };
  FILE *so = NULL;
  int rc = load_journal (journal, &info);

  if (rc != 0)
    return rc;
  h = connect_or_die ();
  b = malloc (bs);
  want = malloc (bs);
  if (b == NULL || want == NULL)
    abort ();
  if (state_out)
    {
      so = fopen (state_out, "w");
      if (so == NULL)
        {
          perror (state_out);
          return 2;
        }
    }
  for (uint64_t lba = 0; lba < nblocks; lba++)
    if (check_block (h, lba, &info[lba], b, want, so, &t) == -1)
      return 2;
  rc = finish_check (h, so, state_out, &t);
  if (rc != 0)
    return rc;
  for (uint64_t lba = 0; lba < nblocks; lba++)
    free (info[lba].seqs);
  free (info);
  free (bases);
  free (b);
  free (want);
  return t.lost || t.corrupt ? 1 : 0;
}
