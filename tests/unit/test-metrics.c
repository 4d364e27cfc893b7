/* appliance/metrics.c: the Prometheus text and the HTML page of a
 * status document.  A sample with two volumes (one with stats and a
 * log with a failed mirror, one whose stats are null and whose name
 * needs escaping), then documents with fields missing, malformed
 * JSON, and the exposition format's grouping rules.
 */
#include <config.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "metrics.h"

/* The second volume's name: we"ird\vol<newline><b>& */
#define ODD_JSON "we\\\"ird\\\\vol\\n<b>&"
#define ODD_LABEL "we\\\"ird\\\\vol\\n<b>&"
#define ODD_HTML "we&quot;ird\\vol\n&lt;b&gt;&amp;"

static const char sample[]
    = "{\"gateway\": {\"version\": \"0.1\", \"uptime_s\": 3725,"
      " \"config\": \"/etc/hhc/gateway.json\"},"
      " \"volumes\": ["
      "  {\"name\": \"vm1\", \"state\": \"running\", \"pid\": 1234,"
      "   \"restarts\": 2, \"backend\": \"file\","
      "   \"stats\": {\"mode\": \"hhc\", \"block_size\": 4096,"
      "    \"slots\": 16384, \"free\": 100, \"clean\": 200, \"dirty\": 50,"
      "    \"read_hits\": 10, \"read_misses\": 2, \"write_hits\": 3,"
      "    \"write_misses\": 4, \"bytes_read\": 1, \"bytes_written\": 2,"
      "    \"evictions\": 0, \"writeback_blocks\": 5,"
      "    \"writeback_backlog\": 50, \"writeback_errors\": 0,"
      "    \"writeback_retries\": 0, \"backend_errors\": 0, \"stalls\": 0,"
      "    \"log_fallbacks\": 0, \"flushes\": 7, \"flush_errors\": 2,"
      "    \"backend_flush_failed\": true,"
      "    \"flush_latency_us\": {\"p50\": 100, \"p99\": 900, \"p999\": 1500},"
      "    \"flush_latency_buckets\": [[3, 0], [7, 1], [15, 4], [31, 4]],"
      "    \"ram_bytes_per_block\": 20.5,"
      "    \"log\": {\"segments\": 1, \"barriers\": 1, \"syncs\": 1,"
      "     \"blocks\": 1, \"revokes\": 0, \"relogged\": 0, \"full_waits\": 0,"
      "     \"used_bytes\": 4096, \"region_bytes\": 8388608, \"mirrors\": 2,"
      "     \"mirrors_failed\": 1,"
      "     \"mirror\": [{\"name\": \"/var/log1.img\", \"failed\": false},"
      "                {\"name\": \"/var/log2.img\", \"failed\": true}]}}},"
      "  {\"name\": \"" ODD_JSON "\", \"state\": \"failed\", \"pid\": 0,"
      "   \"restarts\": 5, \"backend\": \"cos\", \"stats\": null}"
      " ]}";

/* Does text hold line as a whole line? */
static int
has_line (const char *text, const char *line)
{
  size_t n = strlen (line);

  for (const char *p = text; (p = strstr (p, line)) != NULL; p++)
    if ((p == text || p[-1] == '\n') && p[n] == '\n')
      return 1;
  return 0;
}

static size_t
count (const char *text, const char *needle)
{
  size_t n = 0;

  for (const char *p = text; (p = strstr (p, needle)) != NULL; p++)
    n++;
  return n;
}

#define assert_line(text, line)                                                \
  do                                                                           \
    {                                                                          \
      if (!has_line ((text), (line)))                                          \
        fail_msg ("missing line: %s\n--- in ---\n%s", (line), (text));         \
    }                                                                          \
  while (0)

static void
test_gateway_and_volumes (void **state)
{
  char *m = gw_metrics_render (sample);

  (void)state;
  assert_non_null (m);
  assert_line (m, "hhc_gateway_info{version=\"0.1\"} 1");
  assert_line (m, "hhc_gateway_uptime_seconds 3725");
  assert_line (m, "# TYPE hhc_volume_up gauge");
  assert_line (m, "hhc_volume_up{volume=\"vm1\"} 1");
  assert_line (m, "hhc_volume_up{volume=\"" ODD_LABEL "\"} 0");
  assert_line (m, "hhc_volume_stats_up{volume=\"vm1\"} 1");
  assert_line (m, "hhc_volume_stats_up{volume=\"" ODD_LABEL "\"} 0");
  assert_line (m, "hhc_volume_info{volume=\"vm1\",state=\"running\","
                  "backend=\"file\"} 1");
  assert_line (m, "# TYPE hhc_volume_restarts_total counter");
  assert_line (m, "hhc_volume_restarts_total{volume=\"vm1\"} 2");
  assert_line (m, "hhc_volume_restarts_total{volume=\"" ODD_LABEL "\"} 5");
  free (m);
}

static void
test_stats (void **state)
{
  char *m = gw_metrics_render (sample);

  (void)state;
  assert_non_null (m);
  assert_line (m, "# HELP hhc_cache_slots Blocks the SSD cache can hold.");
  assert_line (m, "# TYPE hhc_cache_slots gauge");
  assert_line (m, "hhc_cache_slots{volume=\"vm1\"} 16384");
  assert_line (m, "hhc_cache_free_slots{volume=\"vm1\"} 100");
  assert_line (m, "hhc_cache_clean_slots{volume=\"vm1\"} 200");
  assert_line (m, "hhc_cache_dirty_slots{volume=\"vm1\"} 50");
  assert_line (m, "hhc_cache_ram_per_block_bytes{volume=\"vm1\"} 20.5");
  assert_line (m, "# TYPE hhc_read_hits_total counter");
  assert_line (m, "hhc_read_hits_total{volume=\"vm1\"} 10");
  assert_line (m, "hhc_read_misses_total{volume=\"vm1\"} 2");
  assert_line (m, "hhc_write_hits_total{volume=\"vm1\"} 3");
  assert_line (m, "hhc_write_misses_total{volume=\"vm1\"} 4");
  assert_line (m, "hhc_read_bytes_total{volume=\"vm1\"} 1");
  assert_line (m, "hhc_written_bytes_total{volume=\"vm1\"} 2");
  assert_line (m, "hhc_evictions_total{volume=\"vm1\"} 0");
  assert_line (m, "hhc_writeback_blocks_total{volume=\"vm1\"} 5");
  assert_line (m, "hhc_writeback_backlog_blocks{volume=\"vm1\"} 50");
  assert_line (m, "hhc_flushes_total{volume=\"vm1\"} 7");
  assert_line (m, "# HELP hhc_flush_errors_total NBD flushes that returned "
                  "an error.");
  assert_line (m, "# TYPE hhc_flush_errors_total counter");
  assert_line (m, "hhc_flush_errors_total{volume=\"vm1\"} 2");
  /* A boolean: 1 or 0. */
  assert_line (m, "# TYPE hhc_backend_flush_failed gauge");
  assert_line (m, "hhc_backend_flush_failed{volume=\"vm1\"} 1");
  assert_line (m, "hhc_log_used_bytes{volume=\"vm1\"} 4096");
  assert_line (m, "hhc_log_region_bytes{volume=\"vm1\"} 8388608");
  assert_line (m, "hhc_log_mirrors{volume=\"vm1\"} 2");
  assert_line (m, "hhc_log_mirrors_failed{volume=\"vm1\"} 1");
  assert_line (m, "hhc_log_mirror_healthy{volume=\"vm1\","
                  "mirror=\"/var/log1.img\"} 1");
  assert_line (m, "hhc_log_mirror_healthy{volume=\"vm1\","
                  "mirror=\"/var/log2.img\"} 0");
  /* Stats null: no sample of any stats family for that volume. */
  assert_int_equal (count (m, "{volume=\"" ODD_LABEL "\"}"), 3);
  free (m);
}

static void
test_histogram (void **state)
{
  char *m = gw_metrics_render (sample);

  (void)state;
  assert_non_null (m);
  assert_line (m, "# TYPE hhc_flush_latency_seconds histogram");
  assert_line (m, "hhc_flush_latency_seconds_bucket{volume=\"vm1\","
                  "le=\"0.000003\"} 0");
  assert_line (m, "hhc_flush_latency_seconds_bucket{volume=\"vm1\","
                  "le=\"0.000007\"} 1");
  assert_line (m, "hhc_flush_latency_seconds_bucket{volume=\"vm1\","
                  "le=\"0.000015\"} 4");
  assert_line (m, "hhc_flush_latency_seconds_bucket{volume=\"vm1\","
                  "le=\"0.000031\"} 4");
  /* flushes (7) beyond the last bucket's 4. */
  assert_line (m, "hhc_flush_latency_seconds_bucket{volume=\"vm1\","
                  "le=\"+Inf\"} 7");
  assert_line (m, "hhc_flush_latency_seconds_count{volume=\"vm1\"} 7");
  /* 1 at 5 us, 3 at 11 us, 3 (above 31 us) at 31 us: 131 us. */
  assert_line (m, "hhc_flush_latency_seconds_sum{volume=\"vm1\"} 0.000131");
  assert_int_equal (count (m, "hhc_flush_latency_seconds_bucket{volume=\"we"),
                    0);
  free (m);
}

/* Bounds that do not grow are dropped, counts made non-decreasing,
 * seconds printed exactly.
 */
static void
test_histogram_repair (void **state)
{
  char *m = gw_metrics_render (
      "{\"volumes\": [{\"name\": \"a\", \"stats\": {"
      "\"flush_latency_buckets\": [[3, 2], [2, 5], [7, 1], \"x\", [-1, 0],"
      " [1000000, 3], [67108863, 3]]}}]}");

  (void)state;
  assert_non_null (m);
  assert_line (m, "hhc_flush_latency_seconds_bucket{volume=\"a\","
                  "le=\"0.000003\"} 2");
  assert_int_equal (count (m, "le=\"0.000002\""), 0);
  assert_line (m, "hhc_flush_latency_seconds_bucket{volume=\"a\","
                  "le=\"0.000007\"} 2");
  assert_line (m, "hhc_flush_latency_seconds_bucket{volume=\"a\",le=\"1\"} 3");
  assert_line (m, "hhc_flush_latency_seconds_bucket{volume=\"a\","
                  "le=\"67.108863\"} 3");
  assert_line (m, "hhc_flush_latency_seconds_bucket{volume=\"a\","
                  "le=\"+Inf\"} 3");
  assert_line (m, "hhc_flush_latency_seconds_count{volume=\"a\"} 3");
  free (m);
}

/* Every family's HELP and TYPE come once, before its samples, and its
 * samples are together.
 */
static void
test_grouping (void **state)
{
  char *m = gw_metrics_render (sample), *save = NULL, *line;
  char family[128] = "", seen[8192] = " ";

  (void)state;
  assert_non_null (m);
  for (line = strtok_r (m, "\n", &save); line;
       line = strtok_r (NULL, "\n", &save))
    {
      char name[128], key[132];
      if (sscanf (line, "# TYPE %127s", name) == 1)
        {
          snprintf (key, sizeof key, " %s ", name);
          assert_null (strstr (seen, key));
          assert_true (strlen (seen) + strlen (key) < sizeof seen);
          strcat (seen, key + 1);
          snprintf (family, sizeof family, "%s", name);
          continue;
        }
      if (line[0] == '#')
        {
          assert_int_equal (strncmp (line, "# HELP hhc_", 11), 0);
          continue;
        }
      assert_int_equal (sscanf (line, "%127[^{ ]", name), 1);
      size_t n = strlen (family);
      assert_int_equal (strncmp (name, family, n), 0);
      assert_true (name[n] == '\0' || strcmp (name + n, "_bucket") == 0
                   || strcmp (name + n, "_sum") == 0
                   || strcmp (name + n, "_count") == 0);
    }
  free (m);
}

/* Fields missing here and there: what is there is rendered. */
static void
test_missing_fields (void **state)
{
  char *m = gw_metrics_render (
      "{\"volumes\": [{\"state\": \"running\"},"
      " {\"name\": \"b\"},"
      " {\"name\": \"c\", \"stats\": {\"slots\": 8, \"log\": {},"
      "  \"backend_flush_failed\": false, \"flush_errors\": \"x\"}}]}");

  (void)state;
  assert_non_null (m);
  assert_line (m, "# TYPE hhc_gateway_uptime_seconds gauge");
  assert_int_equal (count (m, "\nhhc_gateway_uptime_seconds "), 0);
  assert_line (m, "hhc_volume_up{volume=\"b\"} 0");
  assert_line (m, "hhc_volume_info{volume=\"b\",state=\"\",backend=\"\"} 1");
  assert_line (m, "hhc_cache_slots{volume=\"c\"} 8");
  assert_line (m, "hhc_backend_flush_failed{volume=\"c\"} 0");
  assert_int_equal (count (m, "hhc_flush_errors_total{"), 0);
  assert_int_equal (count (m, "hhc_log_used_bytes{"), 0);
  assert_int_equal (count (m, "hhc_flush_latency_seconds_bucket"), 0);
  assert_int_equal (count (m, "hhc_volume_up{"), 2);
  free (m);

  m = gw_metrics_render ("{}");
  assert_non_null (m);
  assert_line (m, "# TYPE hhc_flush_latency_seconds histogram");
  free (m);
}

static void
test_malformed (void **state)
{
  static const char *bad[]
      = { "", "{", "[1, 2]", "\"x\"", "{\"a\": }", "{\"a\": 1, \"a\": 2}" };

  (void)state;
  assert_null (gw_metrics_render (NULL));
  assert_null (gw_status_html (NULL));
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      assert_null (gw_metrics_render (bad[i]));
      assert_null (gw_status_html (bad[i]));
    }
}

static void
test_html (void **state)
{
  char *h = gw_status_html (sample);

  (void)state;
  assert_non_null (h);
  assert_non_null (strstr (h, "<!DOCTYPE html>"));
  assert_non_null (strstr (h, "<meta http-equiv=\"refresh\" content=\"2\">"));
  assert_non_null (strstr (h, "<td class=\"name\">vm1</td>"));
  assert_non_null (strstr (h, "<td class=\"name\">" ODD_HTML "</td>"));
  assert_null (strstr (h, "<b>"));
  assert_non_null (strstr (h, "<span class=\"state running\">running</span>"));
  assert_non_null (strstr (h, "<span class=\"state failed\">failed</span>"));
  assert_non_null (strstr (h, "<div class=\"small\">pid 1234</div>"));
  assert_non_null (strstr (h, "<span class=\"mirror bad\" "
                              "title=\"/var/log2.img\">log2.img"));
  assert_non_null (strstr (h, "<span class=\"mirror ok\" "
                              "title=\"/var/log1.img\">log1.img"));
  assert_non_null (strstr (h, "<td>hhc</td>"));
  /* 10 of 12 reads hit; 50 of 16384 dirty; 4096 of 8 MiB of log. */
  assert_non_null (strstr (h, "83.3 %<div class=\"small\">10 / 12<"));
  assert_non_null (strstr (h, "0.3 %<div class=\"small\">50 / 16384<"));
  assert_non_null (strstr (h, "0.0 %<div class=\"small\">4.0 KiB / 8.0 MiB<"));
  assert_non_null (strstr (h, "up 0 d 01:02:05"));
  assert_non_null (strstr (h, "/etc/hhc/gateway.json"));
  /* Self-contained: no script, no external resource. */
  assert_null (strstr (h, "<script"));
  assert_null (strstr (h, "src="));
  assert_null (strstr (h, "http:"));
  assert_null (strstr (h, "https:"));
  free (h);

  h = gw_status_html ("{\"volumes\": []}");
  assert_non_null (h);
  assert_non_null (strstr (h, "no volumes"));
  free (h);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_gateway_and_volumes),
    cmocka_unit_test (test_stats),
    cmocka_unit_test (test_histogram),
    cmocka_unit_test (test_histogram_repair),
    cmocka_unit_test (test_grouping),
    cmocka_unit_test (test_missing_fields),
    cmocka_unit_test (test_malformed),
    cmocka_unit_test (test_html),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
