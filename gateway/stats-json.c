/* The volume's statistics for the outside: hhc_get_counts (a few
 * numbers, for tests and the control socket), hhc_ram_per_block and
 * the JSON document of hhc_stats_json (the stats file, hhcctl stats).
 * The core's only jansson user.  Counters are atomics (stats.h); the
 * LRU, free pool and log counts each take their own lock, one at a
 * time.
 */
#include <config.h>

#include <jansson.h>

#include "common.h"
#include "vol.h"

void
hhc_get_counts (struct hhc_volume *vol, struct hhc_counts *c)
{
  struct hhc_stats *s = &vol->stats;

  memset (c, 0, sizeof *c);
  c->slots = vol->cache.nslots;
  c->free = cache_nfree (&vol->cache) + cache_npending (&vol->cache);
  c->dirty = __atomic_load_n (&vol->ndirty, __ATOMIC_ACQUIRE);
  c->clean = lru_count (&vol->lru, LRU_HOT) + lru_count (&vol->lru, LRU_COLD);
  c->read_hits = stat_get (&s->read_hits);
  c->read_misses = stat_get (&s->read_misses);
  c->write_hits = stat_get (&s->write_hits);
  c->write_misses = stat_get (&s->write_misses);
  c->read_fills = stat_get (&s->read_fills);
  c->promote_bypassed = stat_get (&vol->promote.bypassed);
  c->evictions = stat_get (&s->evictions);
  c->writeback_blocks = stat_get (&s->writeback_blocks);
  c->writeback_errors = stat_get (&s->writeback_errors);
  c->flushes = stat_get (&s->flushes);
  c->flush_errors = stat_get (&s->flush_errors);
  if (vol->log)
    {
      struct log_stats ls;
      log_get_stats (vol->log, &ls);
      c->log_segments = ls.segments;
      c->log_barriers = ls.barriers;
      c->log_syncs = ls.syncs;
      c->log_fua_barriers = ls.fua_barriers;
      c->log_joins = ls.joins;
      c->log_blocks = ls.blocks;
      c->log_revokes = ls.revokes;
      c->log_relogged = ls.relogged;
      c->log_reclaimed = ls.reclaimed;
      c->log_redone = vol->redone;
      c->log_full_waits = ls.full_waits;
      c->log_checkpoints = ls.checkpoints;
      c->log_used = ls.used;
      c->log_region = ls.region_size;
      c->log_segment_size = ls.segment_size;
      c->log_mirrors = ls.mirrors;
      c->log_mirrors_failed = ls.mirrors_failed;
      c->log_mirrors_unvoided = ls.mirrors_unvoided;
    }
}

double
hhc_ram_per_block (struct hhc_volume *vol)
{
  /* Slot entries + bucket heads (7 per 8 slots); stripes, page locks
   * and bitmaps are fixed or per page, counted too.
   */
  double n = vol->idx.nslots;
  double bytes = n * sizeof (struct hhc_slot)
                 + (double)vol->idx.nbuckets * sizeof (uint32_t)
                 + vol->idx.nstripes * sizeof (struct hhc_stripe)
                 + vol->cache.npagelocks * sizeof (pthread_mutex_t)
                 + vol->cache.npages * (2 * sizeof (uint64_t) + 1.0 / 8);
  return bytes / n;
}

/* [[le_us, count], ...], cumulative, up to 2^26 us (67 s). */
static json_t *
hist_json (const struct hhc_hist *h)
{
  enum { N = 25 };
  uint64_t edges[N], counts[N];
  json_t *a = json_array ();

  hist_cumulative (h, N, edges, counts);
  for (unsigned i = 0; a && i < N; i++)
    json_array_append_new (
        a, json_pack ("[I,I]", (json_int_t)edges[i], (json_int_t)counts[i]));
  return a;
}

static json_t *
log_json (struct hhc_volume *vol)
{
  struct hhc_counts c;
  json_t *o, *m = json_array ();
  bool failed;
  const char *name;

  hhc_get_counts (vol, &c);
  for (unsigned i = 0; (name = log_mirror_name (vol->log, i, &failed)); i++)
    json_array_append_new (
        m, json_pack ("{s:s,s:b}", "name", name, "failed", failed));
  o = json_pack (
      "{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "segments",
      (json_int_t)c.log_segments, "barriers", (json_int_t)c.log_barriers,
      "syncs", (json_int_t)c.log_syncs, "blocks", (json_int_t)c.log_blocks,
      "revokes", (json_int_t)c.log_revokes, "relogged",
      (json_int_t)c.log_relogged, "full_waits", (json_int_t)c.log_full_waits,
      "checkpoints", (json_int_t)c.log_checkpoints, "redone",
      (json_int_t)c.log_redone, "used_bytes", (json_int_t)c.log_used,
      "region_bytes", (json_int_t)c.log_region, "mirrors",
      (json_int_t)c.log_mirrors, "mirrors_failed",
      (json_int_t)c.log_mirrors_failed);
  if (o)
    json_object_set_new (o, "fua_barriers",
                         json_integer ((json_int_t)c.log_fua_barriers));
  if (o)
    json_object_set_new (o, "joins", json_integer ((json_int_t)c.log_joins));
  if (o)
    json_object_set_new (o, "segment_bytes",
                         json_integer ((json_int_t)c.log_segment_size));
  if (o)
    json_object_set_new (o, "mirrors_unvoided",
                         json_integer (c.log_mirrors_unvoided));
  if (o)
    json_object_set_new (o, "mirror", m);
  else
    json_decref (m);
  return o;
}

/* "promote": the policy, its settings and the misses it kept out. */
static json_t *
promote_json (struct hhc_volume *vol, const struct hhc_counts *c)
{
  const struct hhc_promote *p = &vol->promote;

  return json_pack ("{s:s,s:I,s:I,s:I,s:I}", "policy",
                    hhc_promote_to_string (vol->conf.promote), "hits",
                    (json_int_t)p->hits, "window", (json_int_t)p->window,
                    "entries", (json_int_t)promote_entries (p), "bypassed",
                    (json_int_t)c->promote_bypassed);
}

char *
hhc_stats_json (struct hhc_volume *vol)
{
  struct hhc_counts c;
  struct hhc_stats *s = &vol->stats;
  json_t *o, *lat;
  char *text;

  hhc_get_counts (vol, &c);
  lat = json_pack ("{s:I,s:I,s:I}", "p50",
                   (json_int_t)hist_quantile (&s->flush_lat, 0.5), "p99",
                   (json_int_t)hist_quantile (&s->flush_lat, 0.99), "p999",
                   (json_int_t)hist_quantile (&s->flush_lat, 0.999));
  o = json_pack ("{s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}",
                 "mode", hhc_mode_to_string (vol->conf.mode), "block_size",
                 (json_int_t)vol->bs, "slots", (json_int_t)c.slots, "free",
                 (json_int_t)c.free, "clean", (json_int_t)c.clean, "dirty",
                 (json_int_t)c.dirty, "read_hits", (json_int_t)c.read_hits,
                 "read_misses", (json_int_t)c.read_misses, "write_hits",
                 (json_int_t)c.write_hits, "write_misses",
                 (json_int_t)c.write_misses, "bytes_read",
                 (json_int_t)stat_get (&s->bytes_read), "bytes_written",
                 (json_int_t)stat_get (&s->bytes_written), "evictions",
                 (json_int_t)c.evictions);
  if (o == NULL || lat == NULL)
    {
      json_decref (o);
      json_decref (lat);
      return NULL;
    }
  json_object_set_new (o, "read_fills", json_integer (c.read_fills));
  json_object_set_new (o, "promote", promote_json (vol, &c));
  json_object_set_new (o, "writeback_blocks",
                       json_integer (c.writeback_blocks));
  json_object_set_new (o, "writeback_backlog", json_integer (c.dirty));
  json_object_set_new (o, "writeback_errors",
                       json_integer (c.writeback_errors));
  json_object_set_new (o, "writeback_retries",
                       json_integer (stat_get (&s->writeback_retries)));
  json_object_set_new (o, "backend_errors",
                       json_integer (stat_get (&s->backend_errors)));
  json_object_set_new (o, "stalls", json_integer (stat_get (&s->stalls)));
  json_object_set_new (o, "seq_bypass_read_bytes",
                       json_integer (stat_get (&vol->seqcut.read_bytes)));
  json_object_set_new (o, "seq_bypass_write_bytes",
                       json_integer (stat_get (&vol->seqcut.write_bytes)));
  json_object_set_new (
      o, "backend_flush_failed",
      json_boolean (__atomic_load_n (&vol->be_failed, __ATOMIC_ACQUIRE)));
  json_object_set_new (o, "log_fallbacks",
                       json_integer (stat_get (&s->log_fallbacks)));
  json_object_set_new (o, "flushes", json_integer (c.flushes));
  json_object_set_new (o, "flush_errors", json_integer (c.flush_errors));
  json_object_set_new (o, "flush_latency_us", lat);
  json_object_set_new (o, "flush_latency_buckets", hist_json (&s->flush_lat));
  json_object_set_new (o, "ram_bytes_per_block",
                       json_real (hhc_ram_per_block (vol)));
  if (vol->log)
    json_object_set_new (o, "log", log_json (vol));
  text = json_dumps (o, JSON_INDENT (2) | JSON_SORT_KEYS);
  json_decref (o);
  return text;
}
