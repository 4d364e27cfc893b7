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

int
do_check (const char *journal, const char *state_out)
{
  FILE *f = fopen (journal, "r");
  char kind;
  unsigned jw;
  uint64_t flushed[256] = { 0 };
  struct lbainfo *info;
  struct nbd_handle *h;
  unsigned char *b, *want;
  uint64_t lost = 0, corrupt = 0, ok = 0, zero = 0, printed = 0;
  FILE *so = NULL;

  if (f == NULL)
    {
      perror (journal);
      return 2;
    }
  if (fscanf (f, "hhc-verify 1 %" SCNu32 " %" SCNu64 " %u %" SCNu64 "\n", &bs,
              &nblocks, &jw, &run)
          != 4
      || jw == 0 || jw > 256 || bs < 512 || bs % 512)
    {
      fprintf (stderr, "hhc-verify: %s: not a journal\n", journal);
      return 2;
    }
  nwriters = jw;
  bases = calloc (nblocks, sizeof *bases);
  info = calloc (nblocks, sizeof *info);
  if (bases == NULL || info == NULL)
    abort ();
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
            goto bad;
          bases[lba] = (struct base){
            .run = r, .seq = seq, .writer = wr, .set = true
          };
          break;
        case 'f':
          if (fscanf (f, "%u %" SCNu64, &w, &seq) != 2 || w >= nwriters)
            goto bad;
          flushed[w] = seq;
          break;
        case 'w':
        case 'z':
          if (fscanf (f, "%u %" SCNu64 " %" SCNu64 " %d %d", &w, &lba, &seq,
                      &done, &fua)
                  != 5
              || w >= nwriters || lba >= nblocks || lba % nwriters != w)
            goto bad;
          {
            struct lbainfo *in = &info[lba];
            if (kind == 'z')
              in->maxzero = seq;
            else
              {
                in->seqs
                    = realloc (in->seqs, (in->nseqs + 1) * sizeof *in->seqs);
                if (in->seqs == NULL)
                  abort ();
                in->seqs[in->nseqs++] = seq;
              }
            in->maxseq = seq;
            if (done && (fua || seq <= flushed[w]))
              in->required = seq;
          }
          break;
        default:
          goto bad;
        }
    }
  fclose (f);

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
    {
      struct lbainfo *in = &info[lba];
      const char *why = NULL;
      uint64_t seq = 0, r = 0;
      uint32_t wr = 0;
      bool is_zero;

      if (nbd_pread (h, b, bs, lba * bs, 0) == -1)
        {
          fprintf (stderr, "hhc-verify: read of block %" PRIu64 ": %s\n", lba,
                   nbd_get_error ());
          return 2;
        }
      is_zero = b[0] == 0 && memcmp (b, b + 1, bs - 1) == 0;
      if (is_zero)
        {
          /* A zeros write of this run, as new as what must be there. */
          if (in->maxzero && in->maxzero >= in->required)
            zero++;
          else if (in->required)
            why = "lost: zeros where a flushed write must be";
          else if (bases[lba].set)
            why = "lost: zeros where the base line had data";
          else
            zero++;
        }
      else
        {
          seq = get64 (b + 24);
          r = get64 (b + 32);
          wr = get64 (b + 16);
          make_block (want, lba, wr, seq, r);
          if (memcmp (b, want, bs) != 0)
            {
              why = "corrupt: not a block written to this LBA";
              if (corrupt == 0)
                diff_block (lba, b, want);
            }
          else if (r == run)
            {
              bool issued = false;
              for (size_t k = 0; k < in->nseqs; k++)
                issued |= in->seqs[k] == seq;
              if (!issued || wr != lba % nwriters)
                why = "corrupt: a write never issued to this LBA";
              else if (seq < in->required)
                why = "lost: older than a flushed write";
            }
          else if (!bases[lba].set || bases[lba].run != r
                   || bases[lba].seq != seq || bases[lba].writer != wr)
            why = "corrupt: another run's block that was not the base line";
          else if (in->required)
            why = "lost: the base line where a flushed write must be";
        }
      if (why)
        {
          if (why[0] == 'l')
            lost++;
          else
            corrupt++;
          if (printed++ < 20)
            fprintf (stderr,
                     "hhc-verify: block %" PRIu64 ": %s (found run %" PRIx64
                     " writer %" PRIu32 " seq %" PRIu64
                     "; required seq %" PRIu64 ", newest issued %" PRIu64 ")\n",
                     lba, why, r, wr, seq, in->required, in->maxseq);
        }
      else
        {
          if (!is_zero)
            ok++;
          if (so && !is_zero)
            fprintf (so, "%" PRIu64 " %" PRIu64 " %" PRIu32 " %" PRIu64 "\n",
                     lba, r, wr, seq);
        }
    }
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
          nblocks, ok, zero, lost, corrupt);
  for (uint64_t lba = 0; lba < nblocks; lba++)
    free (info[lba].seqs);
  free (info);
  free (bases);
  free (b);
  free (want);
  return lost || corrupt ? 1 : 0;

bad:
  fprintf (stderr, "hhc-verify: %s: malformed journal\n", journal);
  return 2;
}
