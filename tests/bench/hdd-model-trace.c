/* The one-head HDD model's debug interface (tests/test-hdd-model.sh):
 * the charge of each request of a scripted sequence, with no clock and
 * no sleeping, so the output is exact.
 *
 *   hdd-model-trace ROTATION-NS SEEK-NS BANDWIDTH-B/S CACHE-BYTES <SCRIPT
 *
 * SCRIPT: one request a line, "ARRIVAL-NS OP OFFSET LEN" with OP one of
 * R (read), W (write), WF (write with FUA), F (flush; OFFSET and LEN
 * are 0).  Output: one line a request,
 * "OP OFFSET LEN start=.. finish=.. seek=.. transfer=.. barrier=.. dirty=..".
 */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hdd-model.h"

static uint64_t
arg_u64 (const char *s)
{
  char *end;
  unsigned long long v = strtoull (s, &end, 10);

  if (*s == '\0' || *end != '\0')
    {
      fprintf (stderr, "hdd-model-trace: not a number: %s\n", s);
      exit (2);
    }
  return v;
}

static int
parse_op (const char *s, enum hdd_op *op, int *fua)
{
  *fua = strcmp (s, "WF") == 0;
  if (strcmp (s, "R") == 0)
    *op = HDD_READ;
  else if (strcmp (s, "W") == 0 || *fua)
    *op = HDD_WRITE;
  else if (strcmp (s, "F") == 0)
    *op = HDD_FLUSH;
  else
    return -1;
  return 0;
}

int
main (int argc, char **argv)
{
  struct hdd_params p;
  struct hdd_model m;
  char line[256], ops[8];
  uint64_t at, off, len;
  enum hdd_op op;
  int fua;

  if (argc != 5 || (p.bandwidth = arg_u64 (argv[3])) == 0)
    {
      fprintf (stderr, "usage: hdd-model-trace ROTATION-NS SEEK-NS "
                       "BANDWIDTH-B/S CACHE-BYTES <SCRIPT\n");
      return 2;
    }
  p.rotation_ns = arg_u64 (argv[1]);
  p.seek_ns = arg_u64 (argv[2]);
  p.cache_bytes = arg_u64 (argv[4]);
  hdd_model_init (&m, &p);
  while (fgets (line, sizeof line, stdin))
    {
      struct hdd_service s;

      if (line[0] == '#' || line[0] == '\n')
        continue;
      if (sscanf (line, "%" SCNu64 " %7s %" SCNu64 " %" SCNu64, &at, ops, &off,
                  &len)
              != 4
          || parse_op (ops, &op, &fua) == -1)
        {
          fprintf (stderr, "hdd-model-trace: bad line: %s", line);
          return 2;
        }
      s = hdd_model_serve (&m, at, op, off, len, fua);
      printf ("%s %" PRIu64 " %" PRIu64 " start=%" PRIu64 " finish=%" PRIu64
              " seek=%" PRIu64 " transfer=%" PRIu64 " barrier=%" PRIu64
              " dirty=%" PRIu64 "\n",
              ops, off, len, s.start, s.finish, s.seek, s.transfer, s.barrier,
              s.dirty);
    }
  return 0;
}
