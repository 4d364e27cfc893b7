/* hhc-gateway's notifications to systemd (sd_notify(3), gateway-int.h):
 *
 *   READY=1       once every volume's socket and the front accept
 *                 connections (first time only), and again when a
 *                 reload has been applied;
 *   RELOADING=1   when SIGHUP starts a reload, with MONOTONIC_USEC
 *                 (systemd 253's Type=notify-reload wants it; older
 *                 systemd ignores the field);
 *   STOPPING=1    when SIGTERM or SIGINT starts the drain and stop;
 *   STATUS=       "N/M volumes up[, front down], B bytes dirty", sent
 *                 when the text changes (the dirty bytes are read
 *                 from the running volumes' control sockets at most
 *                 every DIRTY_PERIOD_MS);
 *   WATCHDOG=1    every half of WatchdogSec (sd_watchdog_enabled(3)),
 *                 from the main loop, so a stuck loop stops the pings.
 *
 * Nothing is sent, and no control socket is asked, when NOTIFY_SOCKET
 * is not set (not run by systemd, or not Type=notify) or when built
 * without libsystemd: the notify_* calls then do nothing.
 *
 * Main thread only.  The functions take `lock` themselves to read the
 * volumes; the control sockets are asked without it.
 */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#ifdef HAVE_LIBSYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "cleanup.h"
#include "control-client.h"
#include "gateway-int.h"

/* How often the dirty bytes are read for STATUS=. */
#define DIRTY_PERIOD_MS 5000

static bool enabled;         /* NOTIFY_SOCKET set, libsystemd built in */
static bool ready_sent;      /* the first READY=1 went out */
static uint64_t watchdog_ms; /* ping period (half of WatchdogSec), or 0 */
static uint64_t next_ping_ms, next_dirty_ms;
static uint64_t dirty_bytes;
static char last_status[168]; /* "STATUS=..." as last sent */

/* One notification (a no-op without libsystemd). */
static void
send_state (const char *state)
{
#ifdef HAVE_LIBSYSTEMD
  int r = sd_notify (0, state);
  if (r < 0)
    msg ("sd_notify: %s", strerror (-r));
#else
  (void)state;
#endif
}

void
notify_init (void)
{
#ifdef HAVE_LIBSYSTEMD
  uint64_t usec = 0;

  enabled = getenv ("NOTIFY_SOCKET") != NULL;
  if (enabled && sd_watchdog_enabled (0, &usec) > 0 && usec >= 2000)
    {
      watchdog_ms = usec / 2000;
      msg ("systemd watchdog: a ping every %" PRIu64 " ms", watchdog_ms);
    }
#endif
}

/* Dirty bytes of one volume from its control socket (0 if unknown). */
static uint64_t
volume_dirty (const char *name)
{
  HHC_CLEANUP_FREE char *ctl = run_path (name, ".ctl");
  char *text = control_stats (ctl, NULL, 0);
  json_t *o = text ? json_loads (text, 0, NULL) : NULL;
  json_t *d = json_object_get (o, "dirty");
  json_t *bs = json_object_get (o, "block_size");
  uint64_t r = 0;

  if (json_is_integer (d) && json_is_integer (bs))
    r = (uint64_t)json_integer_value (d) * (uint64_t)json_integer_value (bs);
  json_decref (o);
  free (text);
  return r;
}

/* Sum the dirty bytes of the running volumes (lock not held). */
static void
read_dirty (void)
{
  char (*names)[80];
  size_t n = 0;
  uint64_t sum = 0;

  pthread_mutex_lock (&lock);
  names = calloc (nvols ? nvols : 1, sizeof *names);
  for (size_t i = 0; names && i < nvols; i++)
    if (!vols[i].removed && vols[i].state == V_RUNNING)
      snprintf (names[n++], sizeof *names, "%s", vols[i].v->name);
  pthread_mutex_unlock (&lock);
  if (names == NULL)
    return;
  for (size_t i = 0; i < n; i++)
    sum += volume_dirty (names[i]);
  free (names);
  dirty_bytes = sum;
}

/* Count the volumes that serve; whether all of them and the front do
 * (lock held).
 */
static bool
count_up (size_t *up, size_t *total, bool *front)
{
  *front = front_serving;
  *up = *total = 0;
  for (size_t i = 0; i < nvols; i++)
    if (!vols[i].removed)
      {
        ++*total;
        *up += vols[i].state == V_RUNNING;
      }
  return *up == *total && *front;
}

/* STATUS= if it changed, READY=1 the first time everything serves. */
static void
update_state (void)
{
  char status[sizeof last_status];
  size_t up, total;
  bool all, front;

  pthread_mutex_lock (&lock);
  all = count_up (&up, &total, &front);
  pthread_mutex_unlock (&lock);
  snprintf (status, sizeof status,
            "STATUS=%zu/%zu volumes up%s, %" PRIu64 " bytes dirty", up, total,
            front ? "" : ", front down", dirty_bytes);
  if (strcmp (status, last_status) != 0)
    {
      strcpy (last_status, status);
      send_state (status);
    }
  if (all && !ready_sent)
    {
      ready_sent = true;
      msg ("every volume serves: ready");
      send_state ("READY=1");
    }
}

int
notify_tick (int wait)
{
  uint64_t now = now_ms ();

  if (!enabled || stopping)
    return wait;
  if (now >= next_dirty_ms)
    {
      read_dirty ();
      next_dirty_ms = now + DIRTY_PERIOD_MS;
    }
  update_state ();
  notify_watchdog ();
  if (watchdog_ms)
    {
      now = now_ms ();
      if (next_ping_ms <= now)
        return 0;
      if (next_ping_ms - now < (uint64_t)wait)
        wait = (int)(next_ping_ms - now);
    }
  return wait;
}

void
notify_watchdog (void)
{
  uint64_t now = now_ms ();

  if (!enabled || watchdog_ms == 0 || now < next_ping_ms)
    return;
  send_state ("WATCHDOG=1");
  next_ping_ms = now + watchdog_ms;
}

void
notify_reloading (void)
{
  struct timespec ts;
  char state[64];

  if (!enabled)
    return;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  snprintf (state, sizeof state, "RELOADING=1\nMONOTONIC_USEC=%" PRIu64,
            (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000);
  send_state (state);
}

void
notify_reloaded (void)
{
  if (!enabled)
    return;
  /* Before the first READY=1, notify_tick sends it once all serve. */
  if (ready_sent)
    send_state ("READY=1");
  update_state ();
}

void
notify_stopping (void)
{
  if (!enabled)
    return;
  strcpy (last_status, "STATUS=stopping");
  send_state ("STOPPING=1\nSTATUS=stopping: draining and stopping the "
              "volumes");
}
