/* Fuzz target: volume_json_parse (cos-backend/volume-json.c), the
 * parse of a cos volume's PREFIX/volume.json.
 *
 * Why: the cos plugin reads volume.json from the store at start-up,
 * and what it finds there decides the geometry of the volume it
 * serves: another tool's object, a newer format, a damaged or hostile
 * store.  The parse must accept only a sane geometry, and otherwise
 * give one message, never crash or read outside the text.
 *
 * What: the input is the object's body, parsed with no size asked for
 * and with sizes asked for that the input picks (its first bytes).
 * Checks beyond the sanitizers': what is accepted is a positive
 * multiple of 512 bytes, in objects of a power of two from 4K to 32M,
 * with a 36-character uuid, and equal to what was asked; a refusal
 * gives a message that starts with "cos: ", even in a buffer too
 * small for it.
 */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "volume-json.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static void
parse (const char *text, size_t len, int64_t want_size,
       int64_t want_object_size, size_t msgsz)
{
  struct volume_json v;
  char *msg = malloc (msgsz);
  int r;

  if (msg == NULL)
    abort ();
  memset (&v, 0xa5, sizeof v);
  r = volume_json_parse (text, len, "bucket", "prefix/volume.json", want_size,
                         want_object_size, &v, msg, msgsz);
  if (r == 0)
    {
      if (v.size == 0 || v.size % 512 != 0 || v.size > INT64_MAX
          || v.object_size < MIN_OBJECT_SIZE || v.object_size > MAX_OBJECT_SIZE
          || (v.object_size & (v.object_size - 1)) != 0
          || memchr (v.uuid, '\0', sizeof v.uuid) != v.uuid + 36
          || (want_size != -1 && (uint64_t)want_size != v.size)
          || (want_object_size != -1
              && (uint64_t)want_object_size != v.object_size))
        {
          fprintf (stderr,
                   "fuzz-volume-json: accepted size %" PRIu64
                   ", object size %" PRIu32 "\n",
                   v.size, v.object_size);
          abort ();
        }
    }
  else if (r != -1 || memchr (msg, '\0', msgsz) == NULL
           || strncmp (msg, "cos: ", msgsz < 6 ? msgsz - 1 : 5) != 0)
    {
      fprintf (stderr, "fuzz-volume-json: r=%d, bad message\n", r);
      abort ();
    }
  free (msg);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  const char *text = (const char *)data;

  parse (text, size, -1, -1, 4096);
  /* The sizes the parameters ask for: the volume's, or others. */
  if (size >= 2)
    {
      int64_t ws = data[0] & 1 ? 1048576 : -1;
      int64_t wo = data[0] & 2 ? 65536 : -1;
      parse (text + 2, size - 2, ws, wo, 1 + data[1] % 128);
    }
  return 0;
}
