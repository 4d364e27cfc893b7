/* hhc-gateway's reload (SIGHUP): the config is read again; volumes
 * added are started, removed ones stopped, changed ones restarted, the
 * rest left running; an invalid config changes nothing.  Settings only
 * a restart changes keep their running values.
 */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "gateway-int.h"

/* Swap one of the settings that only a restart changes back into cfg
 * (the running value stays; the new one is freed with the old config).
 */
static void
keep (char **running, char **next, const char *what)
{
  char *t;

  if ((*running == NULL) != (*next == NULL)
      || (*running && strcmp (*running, *next) != 0))
    msg ("reload: %s changes only when hhc-gateway is restarted", what);
  t = *running;
  *running = *next;
  *next = t;
}

/* Volume v of the new config into *nv: the running one if it has
 * not changed (*fresh false: left running), else a new one to start.
 * The old one is marked removed, and stopped if it changed.
 */
static void
match_volume (const struct gw_volume *v, struct vol *nv, bool *fresh)
{
  struct vol *old = NULL;

  for (size_t j = 0; j < nvols; j++)
    if (!vols[j].removed && strcmp (vols[j].v->name, v->name) == 0)
      old = &vols[j];
  nv->v = v;
  *fresh = true;
  if (old && gw_volume_equal (old->v, v))
    {
      *nv = *old; /* left running */
      nv->v = v;
      *fresh = false;
    }
  else
    msg ("reload: volume %s %s", v->name,
         old ? "changed: restarting it" : "added");
  if (old)
    old->removed = true;
  if (old && *fresh)
    stop_volume (old);
  else if (old)
    old->pid = 0; /* moved to nv */
}

/* Stop the old volumes the new config has no place for, and wait for
 * every old one that still runs.
 */
static void
retire_old (void)
{
  for (size_t j = 0; j < nvols; j++)
    {
      if (!vols[j].removed)
        {
          msg ("reload: volume %s removed", vols[j].v->name);
          stop_volume (&vols[j]);
        }
      while (vols[j].pid > 0)
        {
          int st;
          pid_t pid = waitpid (vols[j].pid, &st, 0);
          if (pid == -1 && errno != EINTR)
            break;
          if (pid > 0)
            vols[j].pid = 0;
        }
    }
}

/* Stop the volumes that the new config drops or changes, wait for them
 * (a changed volume's new nbdkit needs its devices), start the new
 * ones.  Lock held.
 */
static void
apply (struct gw_config *next)
{
  size_t nn = 0;
  struct vol *nv = calloc (next->nvolumes ? next->nvolumes : 1, sizeof *nv);
  bool *fresh = calloc (next->nvolumes ? next->nvolumes : 1, sizeof *fresh);

  if (nv == NULL || fresh == NULL)
    {
      msg ("reload: out of memory");
      exit (EXIT_FAILURE);
    }
  for (size_t i = 0; i < next->nvolumes; i++, nn++)
    match_volume (&next->volumes[i], &nv[nn], &fresh[nn]);
  retire_old ();
  free (vols);
  vols = nv;
  nvols = nn;
  for (size_t i = 0; i < nvols; i++)
    if (fresh[i])
      start_volume (&vols[i]);
  free (fresh);
}

void
reload (void)
{
  struct gw_config next, old;
  char err[512];

  if (gw_config_load (cfg_path, true, &next, err, sizeof err) == -1)
    {
      msg ("reload: %s (the running configuration is kept)", err);
      return;
    }
  /* Volumes that stop or restart and ask for it are drained first,
   * without the lock (a drain takes as long as the backend needs; only
   * this thread changes vols).
   */
  for (size_t j = 0; j < nvols; j++)
    {
      const struct gw_volume *nv = gw_config_find (&next, vols[j].v->name);
      if (vols[j].v->drain_on_stop && vols[j].state == V_RUNNING
          && (nv == NULL || !gw_volume_equal (nv, vols[j].v)))
        drain_volume (&vols[j]);
    }
  pthread_mutex_lock (&lock);
  apply (&next); /* paths still from the running run_dir */
  old = cfg;
  cfg = next;
  keep (&cfg.run_dir, &old.run_dir, "run_dir");
  keep (&cfg.listen_address, &old.listen_address, "listen.address");
  keep (&cfg.listen_socket, &old.listen_socket, "listen.socket");
  keep (&cfg.tls_certificates, &old.tls_certificates, "tls");
  keep (&cfg.tls_psk_file, &old.tls_psk_file, "tls");
  if (cfg.listen_port != old.listen_port)
    msg ("reload: listen.port changes only when hhc-gateway is restarted");
  cfg.listen_port = old.listen_port;
  gw_config_free (&old);
  write_map ();
  pthread_mutex_unlock (&lock);
  msg ("reload: %zu volumes", nvols);
}
