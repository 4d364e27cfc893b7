/* Renderings of hhc-gateway's status document (the JSON that
 * gw_status_fn returns, shape in appliance/metrics.c): Prometheus
 * metrics (metrics.c) and an HTML status page (status-html.c).  Pure
 * functions of their input, no locks, callable from any thread.
 */
#ifndef HHC_APPLIANCE_METRICS_H
#define HHC_APPLIANCE_METRICS_H

/* Prometheus text exposition (format 0.0.4) of status_json, malloc'd; NULL if the JSON is malformed or on ENOMEM. */
char *gw_metrics_render (const char *status_json);

/* A self-contained HTML page of status_json (it reloads itself every 2 s), malloc'd; NULL if the JSON is malformed or on ENOMEM. */
char *gw_status_html (const char *status_json);

#endif /* HHC_APPLIANCE_METRICS_H */
