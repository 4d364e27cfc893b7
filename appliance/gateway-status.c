/* hhc-gateway's status document (for the HTTP server's threads): the
 * volumes as the supervisor sees them, each running one's statistics
 * from its control socket.  metrics.c renders it.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#include "cleanup.h"
#include "control-client.h"
#include "gateway-int.h"

static json_t *
volume_status (const char *name, const char *backend, enum vstate state,
               pid_t pid, unsigned restarts)
{
  json_t *o = json_pack ("{s:s,s:s,s:s,s:i,s:i}", "name", name, "state",
                         vstate_to_string (state), "backend", backend, "pid",
                         (int)pid, "restarts", (int)restarts);
  json_t *stats = NULL;

  if (o && state == V_RUNNING)
    {
      HHC_CLEANUP_FREE char *ctl = run_path (name, ".ctl");
      char *text = control_stats (ctl, NULL, 0);
      if (text)
        stats = json_loads (text, 0, NULL);
      free (text);
    }
  if (o)
    json_object_set_new (o, "stats", stats ? stats : json_null ());
  return o;
}

char *
status_json (void *opaque)
{
  struct snap {
    char name[80], backend[8];
    enum vstate state;
    pid_t pid;
    unsigned restarts;
  } * s;
  size_t n;
  json_t *doc, *a = json_array ();
  char *text;

  (void)opaque;
  pthread_mutex_lock (&lock);
  n = nvols;
  s = calloc (n ? n : 1, sizeof *s);
  for (size_t i = 0; s && i < n; i++)
    {
      snprintf (s[i].name, sizeof s[i].name, "%s", vols[i].v->name);
      snprintf (s[i].backend, sizeof s[i].backend, "%s",
                gw_backend_type_to_string (vols[i].v->type));
      s[i].state = vols[i].state;
      s[i].pid = vols[i].pid;
      s[i].restarts = vols[i].restarts;
    }
  pthread_mutex_unlock (&lock);
  if (s == NULL || a == NULL)
    {
      free (s);
      json_decref (a);
      return NULL;
    }
  for (size_t i = 0; i < n; i++)
    json_array_append_new (a,
                           volume_status (s[i].name, s[i].backend, s[i].state,
                                          s[i].pid, s[i].restarts));
  free (s);
  doc = json_pack ("{s:{s:s,s:I,s:s},s:o}", "gateway", "version",
                   PACKAGE_VERSION, "uptime_s",
                   (json_int_t)((now_ms () - start_ms) / 1000), "config",
                   cfg_path, "volumes", a);
  if (doc == NULL)
    return NULL;
  text = json_dumps (doc, JSON_INDENT (2));
  json_decref (doc);
  return text;
}
