/* hhcctl volume: the volumes of hhc-gateway's volumes_dir, added and
 * removed while it runs (hhcctl(8), "VOLUMES AT RUN TIME").
 *
 *   hhcctl volume add    [--config FILE] [--wait S] FILE|-
 *   hhcctl volume remove [--config FILE] [--wait S] [--drain] NAME
 *   hhcctl volume list   [--config FILE] [--json]
 *
 * The config (default /etc/hhc/gateway.json) gives run_dir and
 * volumes_dir.  add validates the volume as the gateway would, with
 * the main file and the directory (appliance/config-voldir.c), writes
 * DIR/NAME.json atomically, sends SIGHUP and waits until it serves;
 * remove (after a drain, if asked) deletes the file, sends SIGHUP and
 * waits until its nbdkit is gone.  Both are idempotent: the same
 * volume added twice, or a volume removed that is not there, is
 * success with nothing changed.  Two adds at once take turns (a lock
 * on the directory, hhcctl-gwrun.c); a remove needs none (deleting a
 * file only makes another's check stricter).  Nothing here prints a volume's
 * credentials (only names, types and paths of files).
 */
#include <config.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cleanup.h"
#include "control-client.h"
#include "gwconfig.h"
#include "hhcctl.h"
#include "hhcctl-volume.h"

#define DEFAULT_CONFIG "/etc/hhc/gateway.json"
#define MAX_INPUT (1024 * 1024)

struct vopts {
  const char *config;
  unsigned wait_s;
  bool drain, json;
};

/* One error line, exit status 1. */
static int
fail (const char *fmt, ...)
{
  va_list ap;

  fprintf (stderr, "%s: ", cmd_name);
  va_start (ap, fmt);
  vfprintf (stderr, fmt, ap);
  va_end (ap);
  fputc ('\n', stderr);
  return 1;
}

static void
usage (FILE *f)
{
  fprintf (f,
           "usage: hhcctl volume add    [--config FILE] [--wait S] FILE|-\n"
           "       hhcctl volume remove [--config FILE] [--wait S] [--drain] "
           "NAME\n"
           "       hhcctl volume list   [--config FILE] [--json]\n"
           "  --config FILE  hhc-gateway.json(5) (default %s)\n"
           "  --wait S       wait at most S seconds for the gateway "
           "(default 60)\n"
           "  --drain        write back every dirty block first\n"
           "  --json         list as JSON\n",
           DEFAULT_CONFIG);
}

/* The options of sub (drain for remove, json for list); the index of
 * the first operand, -1 after --help or -2 after a usage error.
 */
static int
parse_opts (int argc, char **argv, const char *sub, struct vopts *o)
{
  static const struct option opts[] = {
    { "config", required_argument, NULL, 'c' },
    { "wait", required_argument, NULL, 'w' },
    { "drain", no_argument, NULL, 'd' },
    { "json", no_argument, NULL, 'j' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  int c;
  char *end;
  unsigned long n;

  *o = (struct vopts){ .config = DEFAULT_CONFIG, .wait_s = 60 };
  optind = 1;
  while ((c = getopt_long (argc, argv, ":c:", opts, NULL)) != -1)
    switch (c)
      {
      case 'c':
        o->config = optarg;
        break;
      case 'w':
        n = strtoul (optarg, &end, 10);
        if (*optarg < '0' || *optarg > '9' || *end || n > 86400)
          return usage_error ("--wait: \"%s\" is not 0 to 86400 seconds",
                              optarg),
                 -2;
        o->wait_s = n;
        break;
      case 'd':
      case 'j':
        if (strcmp (sub, c == 'd' ? "remove" : "list") != 0)
          return usage_error ("--%s is not an option of %s",
                              c == 'd' ? "drain" : "json", sub),
                 -2;
        *(c == 'd' ? &o->drain : &o->json) = true;
        break;
      case 'h':
        usage (stdout);
        return -1;
      default:
        return bad_option (c, argv), -2;
      }
  return optind;
}

/* The config of o, with volumes_dir; 0, or 1 after the error line. */
static int
load (const struct vopts *o, bool check_paths, struct gw_config *cfg)
{
  char err[512];

  if (gw_config_load (o->config, check_paths, cfg, err, sizeof err) == -1)
    return fail ("%s", err);
  if (cfg->volumes_dir == NULL)
    {
      gw_config_free (cfg);
      return fail ("%s has no volumes_dir", o->config);
    }
  return 0;
}

/* load, then again under the lock of its volumes_dir, which *lock
 * then holds (hhcctl-gwrun.c): 0, or 1 after the error line.
 */
static int
load_locked (const struct vopts *o, struct gw_config *cfg, int *lock)
{
  char err[512];

  if (load (o, true, cfg))
    return 1;
  *lock = gwrun_lock (cfg->volumes_dir, err, sizeof err);
  gw_config_free (cfg);
  if (*lock == -1)
    return fail ("%s", err);
  if (load (o, true, cfg) == 0)
    return 0;
  close (*lock);
  *lock = -1;
  return 1;
}

/* The whole of path ("-": stdin) into *text; 0, or 1 after the error. */
static int
read_input (const char *path, char **text, size_t *len)
{
  FILE *f = strcmp (path, "-") == 0 ? stdin : fopen (path, "r");
  size_t n;

  if (f == NULL)
    return fail ("%s: %m", path);
  *text = malloc (MAX_INPUT + 1);
  n = *text ? fread (*text, 1, MAX_INPUT + 1, f) : 0;
  if (f != stdin)
    fclose (f);
  if (*text == NULL || n > MAX_INPUT)
    return fail ("%s: %s", path, *text ? "larger than 1 MiB" : "out of memory");
  (*text)[n] = '\0';
  *len = n;
  return 0;
}

/* The "name" string of text, if it has one (malloc'd). */
static char *
peek_name (const char *text, size_t len)
{
  json_t *root = json_loadb (text, len, 0, NULL);
  const char *s = json_string_value (json_object_get (root, "name"));
  char *name = s ? strdup (s) : NULL;

  json_decref (root);
  return name;
}

/* SIGHUP, release *lock (if not -1), then wait until name serves or
 * is gone (a gateway that is not running serves nothing: a removal is
 * then done).
 */
static int
hup_and_wait (const struct gw_config *cfg, const struct vopts *o,
              const char *name, bool served, int *lock)
{
  char err[512];
  int r = gwrun_sighup (cfg->run_dir, err, sizeof err);

  if (*lock != -1)
    close (*lock);
  *lock = -1;
  if (r == -2 && !served)
    {
      fprintf (stderr, "%s: %s: volume %s removed from %s\n", cmd_name, err,
               name, cfg->volumes_dir);
      return 0;
    }
  if (r < 0)
    return fail ("%s", err);
  if (gwrun_wait (cfg->run_dir, name, served, o->wait_s) == -1)
    return served
               ? fail ("volume %s is not served after %u s (%s/%s.json "
                       "stays: the gateway keeps trying to start it; "
                       "see its log)",
                       name, o->wait_s, cfg->volumes_dir, name)
               : fail ("volume %s is still served after %u s", name, o->wait_s);
  return 0;
}

/* Validate text (from path) with cfg's main file and directory, and
 * compare it with what the directory has: 0 to write it, -1 when it
 * is there already, or 1 after an error line.
 */
static int
check_new (const struct vopts *o, const struct gw_config *cfg, const char *path,
           const char *text, size_t len, const char *name)
{
  struct gw_extra_volume x = { .file = path, .text = text, .len = len };
  struct gw_config next;
  const struct gw_volume *old = name ? gw_config_find (cfg, name) : NULL;
  char err[512];
  int r;

  if (old && old->source == NULL)
    return fail ("volume %s is defined in %s, not in %s", name, o->config,
                 cfg->volumes_dir);
  if (gw_config_load_extra (o->config, &x, true, &next, err, sizeof err) == -1)
    return fail ("%s", err);
  r = !old ? 0
      : gw_volume_equal (old, &next.volumes[next.nvolumes - 1])
          ? -1
          : fail ("volume %s exists with other settings", name);
  gw_config_free (&next);
  return r;
}

/* Write (or, when it is there already, leave) volume name, then have
 * the gateway serve it.
 */
static int
install (const struct vopts *o, const struct gw_config *cfg, const char *name,
         const char *text, size_t len, bool there, int *lock)
{
  char err[512];

  if (there)
    {
      fprintf (stderr, "%s: volume %s is there already, unchanged\n", cmd_name,
               name);
      if (gwrun_listed (cfg->run_dir, name)
          && gwrun_answers (cfg->run_dir, name))
        return 0;
    }
  else if (gwrun_write (cfg->volumes_dir, name, text, len, err, sizeof err)
           == -1)
    return fail ("%s", err);
  return hup_and_wait (cfg, o, name, true, lock);
}

static int
volume_add (const struct vopts *o, const char *path)
{
  struct gw_config cfg;
  HHC_CLEANUP_FREE char *text = NULL, *name = NULL;
  size_t len = 0;
  int r, lock = -1;

  if (read_input (path, &text, &len) || load_locked (o, &cfg, &lock))
    return 1;
  name = peek_name (text, len);
  r = check_new (o, &cfg, strcmp (path, "-") == 0 ? "<stdin>" : path, text, len,
                 name);
  if (r != 1)
    r = install (o, &cfg, name, text, len, r == -1, &lock);
  if (lock != -1)
    close (lock);
  gw_config_free (&cfg);
  return r;
}

/* The drain of hhcctl drain, quietly; 0, or 1 after the error line. */
static int
drain (const struct gw_config *cfg, const char *name)
{
  HHC_CLEANUP_FREE char *ctl = NULL;
  char err[256];

  if (asprintf (&ctl, "%s/%s.ctl", cfg->run_dir, name) == -1)
    return fail ("out of memory");
  if (!gwrun_listed (cfg->run_dir, name) || access (ctl, F_OK) == -1)
    return fail ("drain %s: the volume is not served (%s): nothing removed",
                 name, ctl);
  if (control_drain (ctl, NULL, NULL, err, sizeof err) == -1)
    return fail ("drain %s: %s: nothing removed", name, err);
  return 0;
}

/* The text of DIR/NAME.json (malloc'd), or NULL. */
static char *
read_volume_file (const char *dir, const char *name, size_t *len)
{
  HHC_CLEANUP_FREE char *path = NULL;
  char *text = NULL;

  if (asprintf (&path, "%s/%s.json", dir, name) == -1
      || read_input (path, &text, len) != 0)
    {
      free (text);
      return NULL;
    }
  return text;
}

/* After the stop of a drained volume: nothing may be left in its cache
 * or log that the backend lacks (a client that wrote during the drain).
 * If something is, the volume file goes back and the gateway serves the
 * volume again, so its flusher writes it back and a second remove
 * --drain finds it drained: 1 after the error line.
 */
static int
check_drained (const struct vopts *o, const struct gw_config *cfg,
               const struct gw_volume *v, const char *text, size_t len)
{
  HHC_CLEANUP_FREE char *path = NULL;
  char err[512], why[512];
  int lock;

  if (hhcctl_written_back (v->cache, v->logs, v->nlogs, why, sizeof why) == 0)
    return 0;
  /* Put back under the directory's lock, and never over a file another
   * add wrote meanwhile.
   */
  lock = gwrun_lock (cfg->volumes_dir, err, sizeof err);
  if (lock == -1 || text == NULL
      || asprintf (&path, "%s/%s.json", cfg->volumes_dir, v->name) == -1
      || access (path, F_OK) == 0
      || gwrun_write (cfg->volumes_dir, v->name, text, len, err, sizeof err)
             == -1
      || hup_and_wait (cfg, o, v->name, true, &lock) != 0)
    {
      if (lock != -1)
        close (lock);
      return fail ("volume %s stopped with data not written back (%s); add "
                   "the volume again and drain it",
                   v->name, why);
    }
  return fail ("volume %s was written to during the drain (%s): it is served "
               "again, with its file back in %s; remove it again",
               v->name, why, cfg->volumes_dir);
}

/* Unlink DIR/NAME.json and SIGHUP under the directory's lock (so an add
 * of the same name cannot slip between them), then wait until it is
 * gone; then, after a drain, check_drained.
 */
static int
unlink_and_wait (const struct vopts *o, const struct gw_config *cfg,
                 const struct gw_volume *v, const char *name)
{
  HHC_CLEANUP_FREE char *text = NULL;
  char err[512];
  size_t len = 0;
  int lock = gwrun_lock (cfg->volumes_dir, err, sizeof err);

  if (lock == -1)
    return fail ("%s", err);
  if (o->drain && v)
    text = read_volume_file (cfg->volumes_dir, name, &len);
  if (gwrun_unlink (cfg->volumes_dir, name, err, sizeof err) == -1)
    {
      close (lock);
      return fail ("%s", err);
    }
  if (hup_and_wait (cfg, o, name, false, &lock) != 0)
    return 1;
  return o->drain && v ? check_drained (o, cfg, v, text, len) : 0;
}

static int
volume_remove (const struct vopts *o, const char *name)
{
  struct gw_config cfg;
  const struct gw_volume *v;
  int r = 0;

  if (!gw_is_volume_name (name))
    return usage_error ("\"%s\" is not a volume name", name);
  if (load (o, false, &cfg))
    return 1;
  v = gw_config_find (&cfg, name);
  if (v && v->source == NULL)
    r = fail ("volume %s is defined in %s, not in %s", name, o->config,
              cfg.volumes_dir);
  else if (!v && !gwrun_listed (cfg.run_dir, name))
    fprintf (stderr, "%s: no volume %s in %s, nothing to do\n", cmd_name, name,
             cfg.volumes_dir);
  else if (o->drain && drain (&cfg, name))
    r = 1;
  else
    r = unlink_and_wait (o, &cfg, v, name);
  gw_config_free (&cfg);
  return r;
}

static int
volume_list (const struct vopts *o)
{
  struct gw_config cfg;
  json_t *all = json_array ();

  if (load (o, false, &cfg))
    return json_decref (all), 1;
  if (!o->json)
    printf ("%-24s %-8s %s\n", "VOLUME", "BACKEND", "SERVED");
  for (size_t i = 0; i < cfg.nvolumes; i++)
    {
      const struct gw_volume *v = &cfg.volumes[i];
      const char *type = gw_backend_type_to_string (v->type);
      bool served;
      if (v->source == NULL)
        continue;
      served = gwrun_listed (cfg.run_dir, v->name)
               && gwrun_answers (cfg.run_dir, v->name);
      if (o->json)
        json_array_append_new (
            all, json_pack ("{s:s,s:s,s:b,s:s}", "name", v->name, "backend",
                            type, "served", served, "file", v->source));
      else
        printf ("%-24s %-8s %s\n", v->name, type, served ? "yes" : "no");
    }
  if (o->json)
    {
      HHC_CLEANUP_FREE char *s = json_dumps (all, JSON_INDENT (2));
      puts (s ? s : "[]");
    }
  json_decref (all);
  gw_config_free (&cfg);
  return 0;
}

int
hhcctl_volume (int argc, char **argv)
{
  static char name[64];
  const char *sub = argc > 1 ? argv[1] : "";
  struct vopts o;
  int first;

  if (strcmp (sub, "--help") == 0 || strcmp (sub, "-h") == 0)
    return usage (stdout), 0;
  if (strcmp (sub, "add") && strcmp (sub, "remove") && strcmp (sub, "list"))
    return usage_error (argc > 1 ? "unknown subcommand '%s'"
                                 : "add, remove or list is required%s",
                        sub);
  snprintf (name, sizeof name, "hhcctl volume %s", sub);
  cmd_name = name;
  first = parse_opts (argc - 1, argv + 1, sub, &o);
  if (first < 0)
    return first == -1 ? 0 : 2;
  if (strcmp (sub, "list") == 0)
    return first == argc - 1 ? volume_list (&o)
                             : usage_error ("list takes no operand");
  if (first != argc - 2)
    return usage_error ("one %s is required",
                        strcmp (sub, "add") == 0 ? "FILE (or -)" : "NAME");
  return strcmp (sub, "add") == 0 ? volume_add (&o, argv[argc - 1])
                                  : volume_remove (&o, argv[argc - 1]);
}
