/* hhc-gateway.json and its volume files: reading a file whole, and
 * the message for a text jansson refused (used by config.c for the
 * main file and config-voldir.c for each volume file).
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config-int.h"

#define MAX_FILE (16 * 1024 * 1024) /* largest config file read */

/* jansson refused the text: its message, or for a duplicate key ours
 * with the key's path and position.
 */
int
cfg_syntax_error (struct ctx *c, const char *text, size_t len,
                  const json_error_t *je)
{
  struct at a = { .node = NO_NODE };

  if (json_error_code (je) == json_error_duplicate_key
      && (a.node = scan_tree (&c->t, text, len, true)) != 0)
    {
      ptree_path (&c->t, a.node, a.path, sizeof a.path);
      return cfg_fail (c, &a, true, "duplicate key");
    }
  if (c->errlen == 0)
    return -1;
  if (je->line < 1)
    snprintf (c->err, c->errlen, "%s: %s", c->file, je->text);
  else
    snprintf (c->err, c->errlen, "%s:%d:%d: %s", c->file, je->line,
              je->column > 0 ? je->column : 1, je->text);
  return -1;
}

int
cfg_read_file (const char *file, char **text, size_t *len)
{
  int fd = open (file, O_RDONLY | O_CLOEXEC);
  size_t cap = 0;
  ssize_t n;
  char *p;

  *text = NULL;
  *len = 0;
  if (fd == -1)
    return errno;
  do
    {
      if (*len == cap)
        {
          cap = cap ? 2 * cap : 4096;
          p = cap > MAX_FILE ? NULL : realloc (*text, cap);
          if (p == NULL)
            {
              close (fd);
              return cap > MAX_FILE ? EFBIG : ENOMEM;
            }
          *text = p;
        }
      n = read (fd, *text + *len, cap - *len);
      if (n > 0)
        *len += n;
    }
  while (n > 0 || (n == -1 && errno == EINTR));
  n = n == -1 ? errno : 0;
  close (fd);
  return n;
}
