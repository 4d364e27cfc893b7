/* hhc-gateway.json: "volumes_dir", a directory of volume files.
 *
 * Every DIR/NAME.json (NAME not starting with '.') holds one volume
 * object, with exactly the keys of a volumes[] entry and "name" equal
 * to NAME.  The files are read in name order after the main file and
 * validated with the same context: the claims (caches, logs, file
 * backends) and names already taken by the main file's volumes and the
 * files before count against each file, and a message names the file
 * and the line and column in it.  Hidden files (a tool's temporary
 * file, written then renamed into place) and other names are skipped.
 * A directory that does not exist holds no volume (hhc-gateway makes
 * it at start).
 *
 * gw_config_load_extra's extra volume (hhcctl volume add) is read last,
 * in place of the file of its name.
 */
#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config-int.h"

#define SUFFIX ".json"

int
cfg_parse_voldir_key (struct ctx *c, const struct at *root,
                      struct gw_config *cfg)
{
  struct at a;
  struct stat st;
  HHC_CLEANUP_FREE char *parent = NULL;
  int r = cfg_get_string (c, root, "volumes_dir", false, &cfg->volumes_dir, &a);

  if (r <= 0 || !c->check_paths)
    return r;
  if (stat (cfg->volumes_dir, &st) == 0)
    return S_ISDIR (st.st_mode) ? 0
                                : cfg_fail (c, &a, false, "%s: not a directory",
                                            cfg->volumes_dir);
  if (errno != ENOENT)
    return cfg_fail (c, &a, false, "%s: %m", cfg->volumes_dir);
  if (cfg_copy (c, &a, cfg->volumes_dir, &parent) == -1)
    return -1;
  return cfg_must_exist (c, &a, dirname (parent), true);
}

/* A volume name; never hidden (".x.json" would be skipped in a
 * volumes_dir, so the volume would never be served).
 */
bool
gw_is_volume_name (const char *s)
{
  return s[0] != '.' && cfg_is_name (s, "._-", 64);
}

/* The object root of file (want: the name it must have, or NULL),
 * appended to c->cfg->volumes.
 */
static int
add_volume (struct ctx *c, json_t *root, const char *file, const char *want)
{
  struct gw_config *cfg = c->cfg;
  struct at a = { .v = root, .node = 0 }, n;
  size_t i = cfg->nvolumes;
  struct gw_volume *nv = realloc (cfg->volumes, (i + 1) * sizeof *nv);

  if (nv == NULL)
    return cfg_oom (c, &a);
  cfg->volumes = nv;
  memset (&nv[i], 0, sizeof nv[i]);
  cfg->nvolumes++;
  if (cfg_copy (c, &a, file, &nv[i].source) == -1
      || cfg_parse_volume (c, &a, i) == -1)
    return -1;
  if (want && strcmp (nv[i].name, want) != 0 && cfg_member (c, &a, "name", &n))
    return cfg_fail (c, &n, false, "must be \"%s\", as the file is named",
                     want);
  return 0;
}

/* Volume file file (text, len bytes). */
static int
parse_file (struct ctx *c, const char *file, const char *text, size_t len,
            const char *want)
{
  const char *main_file = c->file;
  struct ptree main_t = c->t;
  json_error_t je;
  json_t *root;
  int r = -1;

  c->file = file;
  memset (&c->t, 0, sizeof c->t);
  root = json_loadb (text, len, JSON_REJECT_DUPLICATES, &je);
  if (root == NULL)
    cfg_syntax_error (c, text, len, &je);
  else
    {
      scan_tree (&c->t, text, len, false);
      r = add_volume (c, root, file, want);
      json_decref (root);
    }
  ptree_reset (&c->t);
  c->t = main_t;
  c->file = main_file;
  return r;
}

/* The "name" of the extra volume (malloc'd), if it has one. */
static char *
extra_name (const struct gw_extra_volume *x)
{
  json_t *root = json_loadb (x->text, x->len, 0, NULL);
  const char *s = json_string_value (json_object_get (root, "name"));
  char *name = s ? strdup (s) : NULL;

  json_decref (root);
  return name;
}

static int
is_volume_file (const struct dirent *d)
{
  size_t n = strlen (d->d_name);

  return d->d_name[0] != '.' && n > strlen (SUFFIX)
         && strcmp (d->d_name + n - strlen (SUFFIX), SUFFIX) == 0;
}

/* DIR/entry (entry is NAME.json). */
static int
read_entry (struct ctx *c, const char *dir, const char *entry)
{
  HHC_CLEANUP_FREE char *path = NULL, *text = NULL, *want = NULL;
  struct at none = { .node = NO_NODE };
  size_t len;
  int e;

  if (asprintf (&path, "%s/%s", dir, entry) == -1
      || (want = strndup (entry, strlen (entry) - strlen (SUFFIX))) == NULL)
    return cfg_oom (c, &none);
  e = cfg_read_file (path, &text, &len);
  if (e)
    {
      snprintf (c->err, c->errlen, "%s: %s", path, strerror (e));
      return -1;
    }
  return parse_file (c, path, text ? text : "", len, want);
}

int
cfg_read_voldir (struct ctx *c)
{
  const char *dir = c->cfg->volumes_dir;
  HHC_CLEANUP_FREE char *skip = c->extra ? extra_name (c->extra) : NULL;
  struct dirent **ents = NULL;
  int n, r = 0;

  if (dir == NULL && c->extra)
    snprintf (c->err, c->errlen, "%s: no volumes_dir", c->file);
  if (dir == NULL)
    return c->extra ? -1 : 0;
  n = scandir (dir, &ents, is_volume_file, alphasort);
  if (n == -1 && errno != ENOENT)
    {
      snprintf (c->err, c->errlen, "%s: volumes_dir %s: %m", c->file, dir);
      return -1;
    }
  for (int i = 0; i < n; i++)
    {
      size_t len = strlen (ents[i]->d_name) - strlen (SUFFIX);
      if (r == 0
          && !(skip && strlen (skip) == len
               && strncmp (ents[i]->d_name, skip, len) == 0))
        r = read_entry (c, dir, ents[i]->d_name);
      free (ents[i]);
    }
  free (ents);
  if (r == 0 && c->extra)
    r = parse_file (c, c->extra->file, c->extra->text, c->extra->len, NULL);
  return r;
}
