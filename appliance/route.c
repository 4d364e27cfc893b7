/* nbdkit-hhcroute-plugin: the appliance's front door.  One nbdkit with
 * this plugin listens where the clients connect (TCP or a Unix socket,
 * with TLS when configured) and serves every volume of the gateway
 * under its export name, forwarding each client connection to that
 * volume's own nbdkit (hhc filter + backend plugin) on a Unix socket
 * in the run directory, through libnbd.
 *
 *   nbdkit hhcroute map=/run/hhc/exports
 *
 * The map file holds one line per volume, "NAME SOCKET-PATH"; it is
 * read again on every new connection and listing, so hhc-gateway adds
 * and removes volumes by replacing it (rename) without a restart of
 * the front.
 *
 * Per client connection: a handle holding a small pool of libnbd
 * connections to the volume (`connections=`, default 4; 1 when the
 * volume does not advertise multi-conn, since then a FLUSH covers only
 * its own connection's writes).  A request takes a free one, so
 * requests of one client run in parallel.  Each pool entry's mutex
 * protects its libnbd handle's use (libnbd's synchronous calls).
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libnbd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "parse.h"

#define MAX_CONNS 16

static char *map_path;
static unsigned nconns = 4;

struct conn {
  pthread_mutex_t lock; /* protects nbd's use */
  struct nbd_handle *nbd;
};

struct route {
  struct conn c[MAX_CONNS];
  unsigned n;
  unsigned next; /* round robin start, atomic */
};

static void
route_unload (void)
{
  free (map_path);
}

static int
route_config (const char *key, const char *value)
{
  if (strcmp (key, "map") == 0)
    {
      free (map_path);
      map_path = nbdkit_absolute_path (value);
      return map_path ? 0 : -1;
    }
  if (strcmp (key, "connections") == 0)
    {
      if (hhc_parse_unsigned (value, NULL, &nconns) != NULL || nconns < 1
          || nconns > MAX_CONNS)
        {
          nbdkit_error ("connections=%s: must be from 1 to %d", value,
                        MAX_CONNS);
          return -1;
        }
      return 0;
    }
  nbdkit_error ("unknown parameter '%s'", key);
  return -1;
}

static int
route_config_complete (void)
{
  if (map_path == NULL)
    {
      nbdkit_error ("the map= parameter is required");
      return -1;
    }
  return 0;
}

#define route_config_help                                                      \
  "map=FILE          (required) Lines \"EXPORT SOCKET\": the volumes.\n"       \
  "connections=N     Connections to a volume per client (default 4)."

/* Call fn (name, socket, opaque) for each line of the map; stops and
 * returns what fn returns when that is not 0.  -1 if unreadable.
 */
static int
map_each (int (*fn) (const char *, const char *, void *), void *opaque)
{
  FILE *f = fopen (map_path, "r");
  char *line = NULL;
  size_t cap = 0;
  int r = 0;

  if (f == NULL)
    {
      nbdkit_error ("map=%s: %m", map_path);
      return -1;
    }
  while (r == 0 && getline (&line, &cap, f) != -1)
    {
      char *sp = strchr (line, ' ');
      size_t n = strcspn (line, "\n");
      line[n] = '\0';
      if (sp == NULL || sp == line || sp[1] == '\0')
        continue;
      *sp = '\0';
      r = fn (line, sp + 1, opaque);
    }
  free (line);
  fclose (f);
  return r;
}

static int
add_export (const char *name, const char *sock, void *opaque)
{
  (void)sock;
  return nbdkit_add_export (opaque, name, NULL);
}

static int
route_list_exports (int readonly, int is_tls, struct nbdkit_exports *exports)
{
  return map_each (add_export, exports) == -1 ? -1 : 0;
}

struct lookup {
  const char *name;
  char *sock;
};

static int
find_export (const char *name, const char *sock, void *opaque)
{
  struct lookup *l = opaque;

  if (strcmp (name, l->name) != 0)
    return 0;
  l->sock = strdup (sock);
  return 1;
}

static void
close_route (struct route *rt)
{
  for (unsigned i = 0; i < rt->n; i++)
    {
      nbd_close (rt->c[i].nbd);
      pthread_mutex_destroy (&rt->c[i].lock);
    }
  free (rt);
}

static struct nbd_handle *
connect_volume (const char *name, const char *sock)
{
  struct nbd_handle *h = nbd_create ();

  if (h == NULL)
    {
      nbdkit_error ("export %s: %s", name, nbd_get_error ());
      return NULL;
    }
  if (nbd_connect_unix (h, sock) == -1)
    {
      nbdkit_error ("export %s: the volume is not serving (%s)", name,
                    nbd_get_error ());
      nbd_close (h);
      return NULL;
    }
  return h;
}

static void *
route_open (int readonly)
{
  struct lookup l = { .name = nbdkit_export_name () };
  struct route *rt;
  int r;

  if (l.name == NULL)
    return NULL;
  r = map_each (find_export, &l);
  if (r == -1)
    return NULL;
  if (l.sock == NULL)
    {
      nbdkit_error ("no export named \"%s\"", l.name);
      return NULL;
    }
  rt = calloc (1, sizeof *rt);
  if (rt == NULL)
    {
      nbdkit_error ("calloc: %m");
      free (l.sock);
      return NULL;
    }
  for (unsigned i = 0; i < nconns; i++)
    {
      struct nbd_handle *h = connect_volume (l.name, l.sock);
      if (h == NULL)
        {
          close_route (rt);
          free (l.sock);
          return NULL;
        }
      pthread_mutex_init (&rt->c[i].lock, NULL);
      rt->c[i].nbd = h;
      rt->n++;
      /* Without multi-conn a FLUSH covers one connection only. */
      if (i == 0 && nbd_can_multi_conn (h) != 1)
        break;
    }
  free (l.sock);
  return rt;
}

static void
route_close (void *handle)
{
  close_route (handle);
}

/* Take a connection of the pool: a free one if there is, else wait for
 * the next in turn.
 */
static struct conn *
take (struct route *rt)
{
  unsigned start = __atomic_fetch_add (&rt->next, 1, __ATOMIC_RELAXED);

  for (unsigned k = 0; k < rt->n; k++)
    {
      struct conn *c = &rt->c[(start + k) % rt->n];
      if (pthread_mutex_trylock (&c->lock) == 0)
        return c;
    }
  struct conn *c = &rt->c[start % rt->n];
  pthread_mutex_lock (&c->lock);
  return c;
}

static void
give (struct conn *c)
{
  pthread_mutex_unlock (&c->lock);
}

/* Report a libnbd failure once, with its errno. */
static int
failed (const char *what)
{
  int e = nbd_get_errno ();

  nbdkit_error ("%s: %s", what, nbd_get_error ());
  nbdkit_set_error (e ? e : EIO);
  return -1;
}

/* Ask the first connection (its answers hold for all). */
#define FIRST(rt) (((struct route *)(rt))->c[0].nbd)

static int64_t
route_get_size (void *handle)
{
  int64_t s = nbd_get_size (FIRST (handle));
  return s == -1 ? failed ("get_size") : s;
}

static int
route_block_size (void *handle, uint32_t *minimum, uint32_t *preferred,
                  uint32_t *maximum)
{
  struct nbd_handle *h = FIRST (handle);
  int64_t mn = nbd_get_block_size (h, LIBNBD_SIZE_MINIMUM);
  int64_t pr = nbd_get_block_size (h, LIBNBD_SIZE_PREFERRED);
  int64_t mx = nbd_get_block_size (h, LIBNBD_SIZE_MAXIMUM);

  if (mn <= 0 || pr <= 0 || mx <= 0)
    {
      *minimum = *preferred = *maximum = 0; /* not advertised */
      return 0;
    }
  *minimum = mn;
  *preferred = pr;
  *maximum = mx;
  return 0;
}

#define CAN(fn, call)                                                          \
  static int route_##fn (void *handle)                                         \
  {                                                                            \
    int r = call (FIRST (handle));                                             \
    return r == -1 ? failed (#fn) : r;                                         \
  }
CAN (can_flush, nbd_can_flush)
CAN (can_fua, nbd_can_fua)
CAN (can_trim, nbd_can_trim)
CAN (can_zero, nbd_can_zero)
CAN (can_fast_zero, nbd_can_fast_zero)
CAN (can_multi_conn, nbd_can_multi_conn)
CAN (can_cache, nbd_can_cache)
CAN (is_rotational, nbd_is_rotational)

static int
route_can_write (void *handle)
{
  int r = nbd_is_read_only (FIRST (handle));
  return r == -1 ? failed ("can_write") : !r;
}

static int
route_can_fua_mode (void *handle)
{
  int r = route_can_fua (handle);
  return r == -1 ? -1 : r ? NBDKIT_FUA_NATIVE : NBDKIT_FUA_NONE;
}

static int
route_can_cache_mode (void *handle)
{
  int r = route_can_cache (handle);
  return r == -1 ? -1 : r ? NBDKIT_CACHE_NATIVE : NBDKIT_CACHE_NONE;
}

static uint32_t
fua_of (uint32_t flags)
{
  return flags & NBDKIT_FLAG_FUA ? LIBNBD_CMD_FLAG_FUA : 0;
}

static int
route_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
             uint32_t flags)
{
  struct conn *c = take (handle);
  int r = nbd_pread (c->nbd, buf, count, offset, 0);

  give (c);
  return r == -1 ? failed ("pread") : 0;
}

static int
route_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
              uint32_t flags)
{
  struct conn *c = take (handle);
  int r = nbd_pwrite (c->nbd, buf, count, offset, fua_of (flags));

  give (c);
  return r == -1 ? failed ("pwrite") : 0;
}

static int
route_flush (void *handle, uint32_t flags)
{
  struct conn *c = take (handle);
  int r = nbd_flush (c->nbd, 0);

  give (c);
  return r == -1 ? failed ("flush") : 0;
}

static int
route_trim (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  struct conn *c = take (handle);
  int r = nbd_trim (c->nbd, count, offset, fua_of (flags));

  give (c);
  return r == -1 ? failed ("trim") : 0;
}

static int
route_zero (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  uint32_t f = fua_of (flags);
  struct conn *c = take (handle);
  int r;

  if (!(flags & NBDKIT_FLAG_MAY_TRIM))
    f |= LIBNBD_CMD_FLAG_NO_HOLE;
  if (flags & NBDKIT_FLAG_FAST_ZERO)
    f |= LIBNBD_CMD_FLAG_FAST_ZERO;
  r = nbd_zero (c->nbd, count, offset, f);
  give (c);
  return r == -1 ? failed ("zero") : 0;
}

static int
route_cache (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  struct conn *c = take (handle);
  int r = nbd_cache (c->nbd, count, offset, 0);

  give (c);
  return r == -1 ? failed ("cache") : 0;
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name = "hhcroute",
  .longname = "hhc-gateway export router",
  .version = PACKAGE_VERSION,
  .unload = route_unload,
  .config = route_config,
  .config_complete = route_config_complete,
  .config_help = route_config_help,
  .magic_config_key = "map",
  .list_exports = route_list_exports,
  .open = route_open,
  .close = route_close,
  .get_size = route_get_size,
  .block_size = route_block_size,
  .can_write = route_can_write,
  .can_flush = route_can_flush,
  .can_fua = route_can_fua_mode,
  .can_trim = route_can_trim,
  .can_zero = route_can_zero,
  .can_fast_zero = route_can_fast_zero,
  .can_multi_conn = route_can_multi_conn,
  .can_cache = route_can_cache_mode,
  .is_rotational = route_is_rotational,
  .pread = route_pread,
  .pwrite = route_pwrite,
  .flush = route_flush,
  .trim = route_trim,
  .zero = route_zero,
  .cache = route_cache,
  .errno_is_preserved = 0,
};

NBDKIT_REGISTER_PLUGIN (plugin)
