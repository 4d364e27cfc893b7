/* The config tests' temporary files (configtmp.h). */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "configtmp.h"

int
setup_tmp (void **state)
{
  struct tmp *t = calloc (1, sizeof *t);

  if (t == NULL)
    return -1;
  strcpy (t->dir, "/tmp/test-config-XXXXXX");
  if (mkdtemp (t->dir) == NULL)
    return -1;
  for (int i = 0; i < 3; i++)
    {
      int fd;
      snprintf (t->file[i], sizeof t->file[i], "%s/f%d-XXXXXX", t->dir, i);
      fd = mkstemp (t->file[i]);
      if (fd == -1)
        return -1;
      close (fd);
    }
  *state = t;
  return 0;
}

int
teardown_tmp (void **state)
{
  struct tmp *t = *state;

  for (int i = 0; i < 3; i++)
    unlink (t->file[i]);
  rmdir (t->dir);
  free (t);
  return 0;
}
