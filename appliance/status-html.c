/* hhc-gateway's status page: the status document (metrics.c's top
 * comment) as HTML, rendered server-side with a meta refresh of 2 s, no
 * script and no external resource.  Every string taken from the
 * document goes through put_html (HTML-escaped).  Pure and thread-safe.
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

static void
put_html (FILE *f, const char *s)
{
  for (; *s; s++)
    switch (*s)
      {
      case '&':
        fputs ("&amp;", f);
        break;
      case '<':
        fputs ("&lt;", f);
        break;
      case '>':
        fputs ("&gt;", f);
        break;
      case '"':
        fputs ("&quot;", f);
        break;
      case '\'':
        fputs ("&#39;", f);
        break;
      default:
        fputc (*s, f);
      }
}

static const char page_head[]
    = "<!DOCTYPE html>\n"
      "<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta http-equiv=\"refresh\" content=\"2\">\n"
      "<title>hhc-gateway status</title>\n<style>\n"
      "body{font:13px/1.4 system-ui,sans-serif;margin:16px;color:#222;"
      "background:#f6f7f9}\n"
      "h1{font-size:20px;margin:0 0 2px}\n"
      ".gw{color:#555;margin:0 0 14px}\n"
      "table{border-collapse:collapse;background:#fff;"
      "box-shadow:0 1px 3px rgba(0,0,0,.15)}\n"
      "th,td{padding:6px 7px;border-bottom:1px solid #e3e5e8;"
      "text-align:left;vertical-align:middle;white-space:nowrap}\n"
      "th{white-space:normal}\n"
      "th{background:#2d3e50;color:#fff;font-weight:600}\n"
      ".num{text-align:right;font-variant-numeric:tabular-nums}\n"
      ".name{font-weight:600;white-space:normal;max-width:160px}\n"
      ".state{padding:1px 8px;border-radius:9px;color:#fff}\n"
      ".running{background:#2e8b57}.starting,.restarting{background:#d08b00}"
      "\n.stopped{background:#777}.failed{background:#c0392b}\n"
      ".bar{display:inline-block;width:56px;height:8px;background:#e3e5e8;"
      "border-radius:4px;overflow:hidden;vertical-align:middle;"
      "margin-right:5px}\n"
      ".fill{display:block;height:100%;background:#3b82c4}\n"
      ".fill.hit{background:#2e8b57}.fill.warn{background:#d08b00}"
      ".fill.crit{background:#c0392b}\n"
      ".small{color:#666;font-size:11px}\n"
      ".mirror{display:block;padding:0 6px;margin:1px 0;border-radius:4px;"
      "font-size:11px}\n"
      ".mirror.ok{background:#d7f0df;color:#1d6b3c}\n"
      ".mirror.bad{background:#f7d4d0;color:#8e2419}\n"
      ".none{color:#999}\n.foot{color:#666;margin-top:12px}\n"
      "</style>\n</head>\n<body>\n<h1>hhc-gateway</h1>\n";

static const char table_head[]
    = "<table>\n<thead><tr><th>Volume</th><th>State</th>"
      "<th>Restarts</th><th>Backend</th><th>Mode</th><th>Read hits</th>"
      "<th>Dirty</th><th>Log use</th><th>Log mirrors</th>"
      "<th>Flush latency</th></tr></thead>\n<tbody>\n";

static const char page_tail[]
    = "</tbody>\n</table>\n<p class=\"foot\">Refreshes every 2 s. "
      "<a href=\"/metrics\">/metrics</a> (Prometheus) &middot; "
      "<a href=\"/status\">/status</a> (JSON)</p>\n</body>\n</html>\n";

static void
put_none (FILE *f)
{
  fputs ("<td class=\"none\">&ndash;</td>", f);
}

/* A cell with a bar of part/whole and "P %", DETAIL below; a fill
 * gauge (dirty blocks, log use) turns amber at 75 %, red at 90 %.
 */
static void
put_bar (FILE *f, const char *cls, bool fill_gauge, double part, double whole,
         const char *detail)
{
  double pct = whole > 0 ? 100 * part / whole : 0;
  const char *level = "";

  pct = pct < 0 ? 0 : pct > 100 ? 100 : pct;
  if (fill_gauge)
    level = pct >= 90 ? " crit" : pct >= 75 ? " warn" : "";
  fprintf (f,
           "<td><span class=\"bar\"><span class=\"fill %s%s\" "
           "style=\"width:%.1f%%\"></span></span>%.1f %%"
           "<div class=\"small\">%s</div></td>",
           cls, level, pct, pct, detail);
}

/* bytes in KiB, MiB, ... (one decimal). */
static void
format_bytes (char *buf, size_t n, double bytes)
{
  static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
  unsigned u = 0;

  while (bytes >= 1024 && u < 4)
    {
      bytes /= 1024;
      u++;
    }
  snprintf (buf, n, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
}

/* A text cell of obj[key] (string or number). */
static void
put_text_cell (FILE *f, const json_t *obj, const char *key)
{
  const json_t *j = json_object_get (obj, key);

  if (json_is_string (j))
    {
      fputs ("<td>", f);
      put_html (f, json_string_value (j));
      fputs ("</td>", f);
    }
  else if (json_is_number (j))
    fprintf (f, "<td class=\"num\">%.15g</td>", json_number_value (j));
  else
    put_none (f);
}

static void
put_hit_ratio (FILE *f, const json_t *stats)
{
  double h, m;
  char detail[64];

  if (doc_num (stats, "read_hits", &h) && doc_num (stats, "read_misses", &m)
      && h + m > 0)
    {
      snprintf (detail, sizeof detail, "%.0f / %.0f", h, h + m);
      put_bar (f, "hit", false, h, h + m, detail);
    }
  else
    put_none (f);
}

static void
put_dirty (FILE *f, const json_t *stats)
{
  double d, n;
  char detail[64];

  if (doc_num (stats, "dirty", &d) && doc_num (stats, "slots", &n))
    {
      snprintf (detail, sizeof detail, "%.0f / %.0f", d, n);
      put_bar (f, "dirty", true, d, n, detail);
    }
  else
    put_none (f);
}

static void
put_log_use (FILE *f, const json_t *log)
{
  double u, r;
  char used[32], region[32], detail[80];

  if (doc_num (log, "used_bytes", &u) && doc_num (log, "region_bytes", &r))
    {
      format_bytes (used, sizeof used, u);
      format_bytes (region, sizeof region, r);
      snprintf (detail, sizeof detail, "%s / %s", used, region);
      put_bar (f, "log", true, u, r, detail);
    }
  else
    put_none (f);
}

/* One badge per mirror: the path's last component, the whole path in
 * its title.
 */
static void
put_mirror_cell (FILE *f, const json_t *log)
{
  const json_t *ms = json_object_get (log, "mirror"), *m;
  size_t i;

  if (json_array_size (ms) == 0)
    {
      put_none (f);
      return;
    }
  fputs ("<td>", f);
  json_array_foreach (ms, i, m)
  {
    const char *name = doc_str (m, "name"), *base;
    bool bad = json_is_true (json_object_get (m, "failed"));
    name = name ? name : "?";
    base = strrchr (name, '/') && strrchr (name, '/')[1]
               ? strrchr (name, '/') + 1
               : name;
    fprintf (f, "<span class=\"mirror %s\" title=\"", bad ? "bad" : "ok");
    put_html (f, name);
    fputs ("\">", f);
    put_html (f, base);
    fputs (bad ? " &#10007; failed" : " &#10003; ok", f);
    fputs ("</span>", f);
  }
  fputs ("</td>", f);
}

static void
put_latency (FILE *f, const json_t *stats)
{
  const json_t *lat = json_object_get (stats, "flush_latency_us");
  double p50, p99;

  if (doc_num (lat, "p50", &p50) && doc_num (lat, "p99", &p99))
    fprintf (f,
             "<td>p50 %.15g &micro;s<div class=\"small\">p99 %.15g "
             "&micro;s</div></td>",
             p50, p99);
  else
    put_none (f);
}

/* "pid N" below the state, when there is one. */
static void
put_pid (FILE *f, const json_t *v)
{
  double pid;

  if (doc_num (v, "pid", &pid) && pid > 0)
    fprintf (f, "<div class=\"small\">pid %.0f</div>", pid);
}

static void
put_volume_row (FILE *f, const json_t *v)
{
  const json_t *stats = json_object_get (v, "stats");
  const json_t *log = json_object_get (stats, "log");
  const char *name = doc_str (v, "name"), *st = doc_str (v, "state");

  fputs ("<tr><td class=\"name\">", f);
  put_html (f, name ? name : "?");
  fputs ("</td>", f);
  if (st)
    {
      fputs ("<td><span class=\"state ", f);
      put_html (f, st);
      fputs ("\">", f);
      put_html (f, st);
      fputs ("</span>", f);
      put_pid (f, v);
      fputs ("</td>", f);
    }
  else
    put_none (f);
  put_text_cell (f, v, "restarts");
  put_text_cell (f, v, "backend");
  put_text_cell (f, stats, "mode");
  put_hit_ratio (f, stats);
  put_dirty (f, stats);
  put_log_use (f, log);
  put_mirror_cell (f, log);
  put_latency (f, stats);
  fputs ("</tr>\n", f);
}

static void
put_gateway_line (FILE *f, const json_t *gw)
{
  const char *version = doc_str (gw, "version"),
             *config = doc_str (gw, "config");
  double up;

  fputs ("<p class=\"gw\">", f);
  if (version)
    {
      fputs ("version ", f);
      put_html (f, version);
    }
  if (doc_num (gw, "uptime_s", &up))
    {
      long long s = (long long)up;
      fprintf (f, " &middot; up %lld d %02lld:%02lld:%02lld", s / 86400,
               s / 3600 % 24, s / 60 % 60, s % 60);
    }
  if (config)
    {
      fputs (" &middot; config ", f);
      put_html (f, config);
    }
  fputs ("</p>\n", f);
}

char *
gw_status_html (const char *status_json)
{
  json_auto_t *doc = doc_parse (status_json);
  const json_t *vols, *v;
  struct doc_out o;
  size_t i;

  if (doc == NULL || doc_out_open (&o) == -1)
    return NULL;
  vols = json_object_get (doc, "volumes");
  fputs (page_head, o.f);
  put_gateway_line (o.f, json_object_get (doc, "gateway"));
  fputs (table_head, o.f);
  json_array_foreach (vols, i, v)
  {
    put_volume_row (o.f, v);
  }
  if (json_array_size (vols) == 0)
    fputs ("<tr><td colspan=\"10\" class=\"none\">no volumes</td></tr>\n", o.f);
  fputs (page_tail, o.f);
  return doc_out_close (&o);
}
