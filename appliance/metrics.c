/* Status document -> Prometheus text (format 0.0.4) and an HTML page.
 *
 * The document is what appliance/gateway.c builds for gw_status_fn;
 * every field may be missing (and is then left out of the output):
 *
 *   { "gateway": { "version": S, "uptime_s": N, "config": S },
 *     "volumes": [ { "name": S, "state": S, "pid": N, "restarts": N,
 *                    "backend": S,
 *                    "stats": <the filter's stats JSON> | null } ] }
 *
 * state is running | starting | restarting | stopped | failed; stats is
 * null while the volume's nbdkit cannot be asked.  The stats keys are
 * those of hhc_stats_json (gateway/stats-json.c), "log" only with a log.
 *
 * Metrics.  The exposition format wants each family's samples
 * together, after its # HELP and # TYPE lines: so the loops run family
 * by family, and inside a family volume by volume.  A family's HELP
 * and TYPE lines are printed even when no volume has the field.  Every
 * per-volume sample has the label volume="NAME"; a volume without a
 * name is skipped.  Label values are escaped (\\, \", \n).
 *
 *   hhc_gateway_*           the daemon (no labels)
 *   hhc_volume_*            the supervisor's view of a volume
 *   stat_families[]         one gauge or counter per stats key
 *                           (a boolean key: 1 or 0)
 *   hhc_log_mirror_healthy  one sample per log mirror
 *   hhc_flush_latency_seconds  histogram of flush_latency_buckets
 *
 * The flush histogram's buckets are the filter's cumulative
 * [le_us, count] pairs in seconds; its +Inf bucket and _count are the
 * larger of the last bucket's count and "flushes" (the buckets end at
 * 67 s); _sum is approximate: each bucket's flushes counted at the
 * bucket's midpoint, those above the last bound at that bound.
 *
 * The HTML page is rendered by status-html.c, server-side, with a meta
 * refresh of 2 s: no script, no external resource.  Every string taken
 * from the document goes through put_html (HTML-escaped).
 *
 * Output goes through open_memstream; all functions are pure and
 * thread-safe (no shared state).
 */
#include <config.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "metrics.h"
#include "status-doc.h"

/* ------------------------------------------------------------------ */
/* Prometheus. */

enum family_type { COUNTER, GAUGE };

static const char *
family_type_to_string (enum family_type t)
{
  return t == COUNTER ? "counter" : "gauge";
}

/* A family read from each volume's stats: hhc_NAME{volume} = the
 * stats key KEY ("log.KEY": the key of the stats' "log" object), a
 * number or a boolean (1 or 0).
 */
struct stat_family {
  const char *name;
  enum family_type type;
  const char *key;
  const char *help;
};

static const struct stat_family stat_families[] = {
  { "cache_block_size_bytes", GAUGE, "block_size", "Size of a cache block." },
  { "cache_slots", GAUGE, "slots", "Blocks the SSD cache can hold." },
  { "cache_free_slots", GAUGE, "free", "Cache slots that hold no block." },
  { "cache_clean_slots", GAUGE, "clean",
    "Cache slots that hold a block equal to the backend's." },
  { "cache_dirty_slots", GAUGE, "dirty",
    "Cache slots that hold a block not yet written back." },
  { "cache_ram_per_block_bytes", GAUGE, "ram_bytes_per_block",
    "RAM that the cache index takes per cache block." },
  { "read_hits_total", COUNTER, "read_hits",
    "Block reads served from the cache." },
  { "read_misses_total", COUNTER, "read_misses",
    "Block reads that went to the backend." },
  { "write_hits_total", COUNTER, "write_hits",
    "Block writes to a block the cache held." },
  { "write_misses_total", COUNTER, "write_misses",
    "Block writes to a block the cache did not hold." },
  { "read_bytes_total", COUNTER, "bytes_read", "Bytes read by NBD clients." },
  { "written_bytes_total", COUNTER, "bytes_written",
    "Bytes written by NBD clients." },
  { "evictions_total", COUNTER, "evictions",
    "Clean blocks evicted from the cache." },
  { "writeback_blocks_total", COUNTER, "writeback_blocks",
    "Dirty blocks written back to the backend." },
  { "writeback_backlog_blocks", GAUGE, "writeback_backlog",
    "Dirty blocks waiting to be written back." },
  { "writeback_errors_total", COUNTER, "writeback_errors",
    "Write-backs that failed." },
  { "writeback_retries_total", COUNTER, "writeback_retries",
    "Write-backs retried after an error." },
  { "backend_errors_total", COUNTER, "backend_errors",
    "Errors returned by the backend." },
  { "stalls_total", COUNTER, "stalls",
    "Writes that waited for the write-back (no free slot, too many dirty "
    "blocks)." },
  { "log_fallbacks_total", COUNTER, "log_fallbacks",
    "Flushes made durable by writing back, no log mirror being left." },
  { "flushes_total", COUNTER, "flushes",
    "NBD flushes (write barriers) completed." },
  { "flush_errors_total", COUNTER, "flush_errors",
    "NBD flushes that returned an error." },
  { "backend_flush_failed", GAUGE, "backend_flush_failed",
    "1 once a backend flush failed with pass-downs unflushed: every flush "
    "fails until the volume is reopened." },
  { "log_used_bytes", GAUGE, "log.used_bytes", "Bytes of the HDD log in use." },
  { "log_region_bytes", GAUGE, "log.region_bytes",
    "Size of the HDD log's region." },
  { "log_mirrors", GAUGE, "log.mirrors", "Mirrors of the HDD log." },
  { "log_mirrors_failed", GAUGE, "log.mirrors_failed",
    "Mirrors of the HDD log that have failed." },
  { "log_mirrors_unvoided", GAUGE, "log.mirrors_unvoided",
    "Failed mirrors whose stale log is not voided yet (a replay after "
    "losing the cache would use it)." },
  { "log_barriers_total", COUNTER, "log.barriers",
    "Barriers written to the HDD log." },
  { "log_syncs_total", COUNTER, "log.syncs", "Syncs of the HDD log." },
  { "log_blocks_total", COUNTER, "log.blocks",
    "Blocks appended to the HDD log." },
  { "log_full_waits_total", COUNTER, "log.full_waits",
    "Waits for space in a full HDD log." },
};

static void
put_family (FILE *f, const char *name, enum family_type type, const char *help)
{
  fprintf (f, "# HELP hhc_%s %s\n# TYPE hhc_%s %s\n", name, help, name,
           family_type_to_string (type));
}

static void
put_label_value (FILE *f, const char *s)
{
  for (; *s; s++)
    switch (*s)
      {
      case '\\':
        fputs ("\\\\", f);
        break;
      case '"':
        fputs ("\\\"", f);
        break;
      case '\n':
        fputs ("\\n", f);
        break;
      default:
        fputc (*s, f);
      }
}

/* ,KEY="VALUE" (without the comma for the first label). */
static void
put_label (FILE *f, bool first, const char *key, const char *value)
{
  fprintf (f, "%s%s=\"", first ? "" : ",", key);
  put_label_value (f, value);
  fputc ('"', f);
}

/* hhc_NAME{volume="VOL" (the caller adds labels and closes the brace. */
static void
put_series (FILE *f, const char *name, const char *vol)
{
  fprintf (f, "hhc_%s{", name);
  put_label (f, true, "volume", vol);
}

/* " VALUE\n" of a JSON number or boolean (1, 0). */
static void
put_value (FILE *f, const json_t *v)
{
  if (json_is_boolean (v))
    fprintf (f, " %d\n", json_is_true (v));
  else if (json_is_integer (v))
    fprintf (f, " %" JSON_INTEGER_FORMAT "\n", json_integer_value (v));
  else
    fprintf (f, " %.15g\n", json_number_value (v));
}

/* The stats key KEY or log.KEY of a volume, or NULL. */
static const json_t *
stat_value (const json_t *vol, const char *key)
{
  const json_t *stats = json_object_get (vol, "stats");

  if (strncmp (key, "log.", 4) == 0)
    {
      stats = json_object_get (stats, "log");
      key += 4;
    }
  return json_object_get (stats, key);
}

static const char *
vol_name (const json_t *vol)
{
  return doc_str (vol, "name");
}

static void
put_gateway (FILE *f, const json_t *doc)
{
  const json_t *gw = json_object_get (doc, "gateway");
  const json_t *up = json_object_get (gw, "uptime_s");
  const char *version = doc_str (gw, "version");

  put_family (f, "gateway_info", GAUGE,
              "Always 1; the label version is hhc-gateway's version.");
  if (version)
    {
      fputs ("hhc_gateway_info{", f);
      put_label (f, true, "version", version);
      fputs ("} 1\n", f);
    }
  put_family (f, "gateway_uptime_seconds", GAUGE,
              "Seconds since hhc-gateway started.");
  if (json_is_number (up))
    {
      fputs ("hhc_gateway_uptime_seconds", f);
      put_value (f, up);
    }
}

/* hhc_volume_info, _up, _stats_up, _restarts_total. */
static void
put_volume_families (FILE *f, const json_t *vols)
{
  const json_t *v;
  size_t i;

  put_family (f, "volume_info", GAUGE,
              "Always 1; the labels are the volume's state (running, "
              "starting, restarting, stopped, failed) and backend.");
  json_array_foreach (vols, i, v)
  {
    const char *st = doc_str (v, "state"), *be = doc_str (v, "backend");
    if (vol_name (v) == NULL)
      continue;
    put_series (f, "volume_info", vol_name (v));
    put_label (f, false, "state", st ? st : "");
    put_label (f, false, "backend", be ? be : "");
    fputs ("} 1\n", f);
  }
  put_family (f, "volume_up", GAUGE, "1 when the volume's nbdkit is running.");
  json_array_foreach (vols, i, v)
  {
    const char *st = doc_str (v, "state");
    if (vol_name (v) == NULL)
      continue;
    put_series (f, "volume_up", vol_name (v));
    fprintf (f, "} %d\n", st && strcmp (st, "running") == 0);
  }
  put_family (f, "volume_stats_up", GAUGE,
              "1 when the volume's nbdkit answered for its statistics.");
  json_array_foreach (vols, i, v)
  {
    if (vol_name (v) == NULL)
      continue;
    put_series (f, "volume_stats_up", vol_name (v));
    fprintf (f, "} %d\n", json_is_object (json_object_get (v, "stats")));
  }
  put_family (f, "volume_restarts_total", COUNTER,
              "Times the supervisor restarted the volume's nbdkit.");
  json_array_foreach (vols, i, v)
  {
    const json_t *r = json_object_get (v, "restarts");
    if (vol_name (v) == NULL || !json_is_number (r))
      continue;
    put_series (f, "volume_restarts_total", vol_name (v));
    fputc ('}', f);
    put_value (f, r);
  }
}

static void
put_stat_family (FILE *f, const json_t *vols, const struct stat_family *fam)
{
  const json_t *v;
  size_t i;

  put_family (f, fam->name, fam->type, fam->help);
  json_array_foreach (vols, i, v)
  {
    const json_t *val = stat_value (v, fam->key);
    if (vol_name (v) == NULL
        || !(json_is_number (val) || json_is_boolean (val)))
      continue;
    put_series (f, fam->name, vol_name (v));
    fputc ('}', f);
    put_value (f, val);
  }
}

static void
put_mirrors (FILE *f, const json_t *vols)
{
  const json_t *v, *m;
  size_t i, j;

  put_family (f, "log_mirror_healthy", GAUGE,
              "1 while the HDD log mirror is healthy, 0 once it has failed.");
  json_array_foreach (vols, i, v)
  {
    const json_t *ms = stat_value (v, "log.mirror");
    if (vol_name (v) == NULL)
      continue;
    json_array_foreach (ms, j, m)
    {
      const json_t *failed = json_object_get (m, "failed");
      if (doc_str (m, "name") == NULL || !json_is_boolean (failed))
        continue;
      put_series (f, "log_mirror_healthy", vol_name (v));
      put_label (f, false, "mirror", doc_str (m, "name"));
      fprintf (f, "} %d\n", !json_is_true (failed));
    }
  }
}

/* us microseconds as decimal seconds, exact ("0.000003", "1.5", "67"). */
static void
format_seconds (char *buf, size_t n, uint64_t us)
{
  size_t len;

  snprintf (buf, n, "%" PRIu64 ".%06" PRIu64, us / 1000000, us % 1000000);
  len = strlen (buf);
  while (buf[len - 1] == '0')
    buf[--len] = '\0';
  if (buf[len - 1] == '.')
    buf[--len] = '\0';
}

/* One [le_us, count] pair; false if e is not one. */
static bool
bucket_of (const json_t *e, uint64_t *le, uint64_t *count)
{
  const json_t *l = json_array_get (e, 0), *c = json_array_get (e, 1);

  if (json_array_size (e) != 2 || !json_is_integer (l) || !json_is_integer (c)
      || json_integer_value (l) < 0 || json_integer_value (c) < 0)
    return false;
  *le = json_integer_value (l);
  *count = json_integer_value (c);
  return true;
}

/* One volume's histogram.  Bounds must grow (a pair that does not is
 * skipped) and counts are made non-decreasing.
 */
static void
put_histogram (FILE *f, const char *vol, const json_t *stats)
{
  const json_t *a = json_object_get (stats, "flush_latency_buckets"), *e;
  const json_t *fl = json_object_get (stats, "flushes");
  uint64_t le, n, prev_le = 0, prev = 0, total;
  double sum = 0;
  bool any = false;
  char buf[32];
  size_t i;

  if (!json_is_array (a))
    return;
  json_array_foreach (a, i, e)
  {
    if (!bucket_of (e, &le, &n) || (any && le <= prev_le))
      continue;
    n = n < prev ? prev : n;
    sum += (double)(n - prev) * (double)(prev_le + le) / 2e6;
    format_seconds (buf, sizeof buf, le);
    put_series (f, "flush_latency_seconds_bucket", vol);
    put_label (f, false, "le", buf);
    fprintf (f, "} %" PRIu64 "\n", n);
    prev_le = le;
    prev = n;
    any = true;
  }
  total = prev;
  if (json_is_integer (fl) && json_integer_value (fl) > (json_int_t)total)
    total = json_integer_value (fl);
  sum += (double)(total - prev) * (double)prev_le / 1e6;
  put_series (f, "flush_latency_seconds_bucket", vol);
  fprintf (f, ",le=\"+Inf\"} %" PRIu64 "\n", total);
  put_series (f, "flush_latency_seconds_sum", vol);
  fprintf (f, "} %.6f\n", sum);
  put_series (f, "flush_latency_seconds_count", vol);
  fprintf (f, "} %" PRIu64 "\n", total);
}

static void
put_histograms (FILE *f, const json_t *vols)
{
  const json_t *v;
  size_t i;

  fputs ("# HELP hhc_flush_latency_seconds Latency of NBD flushes; _sum is "
         "approximate (each bucket's flushes counted at its midpoint).\n"
         "# TYPE hhc_flush_latency_seconds histogram\n",
         f);
  json_array_foreach (vols, i, v)
  {
    if (vol_name (v))
      put_histogram (f, vol_name (v), json_object_get (v, "stats"));
  }
}

char *
gw_metrics_render (const char *status_json)
{
  json_auto_t *doc = doc_parse (status_json);
  const json_t *vols;
  struct doc_out o;

  if (doc == NULL || doc_out_open (&o) == -1)
    return NULL;
  vols = json_object_get (doc, "volumes");
  put_gateway (o.f, doc);
  put_volume_families (o.f, vols);
  for (size_t i = 0; i < sizeof stat_families / sizeof stat_families[0]; i++)
    put_stat_family (o.f, vols, &stat_families[i]);
  put_mirrors (o.f, vols);
  put_histograms (o.f, vols);
  return doc_out_close (&o);
}
