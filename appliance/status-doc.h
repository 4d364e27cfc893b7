/* The status document and memory streams (status-doc.c). */
#ifndef HHC_APPLIANCE_STATUS_DOC_H
#define HHC_APPLIANCE_STATUS_DOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

/* The document, or NULL if text is not a JSON object. */
json_t *doc_parse (const char *text);

/* A memory stream; *buf receives the text when it is closed. */
struct doc_out {
  FILE *f;
  char *buf;
  size_t len;
};

int doc_out_open (struct doc_out *o);
/* Close the stream: its text, or NULL (and nothing left) on error. */
char *doc_out_close (struct doc_out *o);

/* obj[key] as a string, or NULL. */
const char *doc_str (const json_t *obj, const char *key);
/* obj[key] as a number (integer or real); false if it is not one. */
bool doc_num (const json_t *obj, const char *key, double *v);

#endif /* HHC_APPLIANCE_STATUS_DOC_H */
