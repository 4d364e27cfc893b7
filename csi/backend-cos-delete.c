/* hhc-csi: deleting a cos volume.  Unless it is claimed, every object
 * under P/ goes, page by page of ListObjectsV2, and P/volume.json
 * last: a delete cut short leaves a volume that still exists (with
 * holes) and that the CO's retry of DeleteVolume finishes.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend-cos.h"
#include "nbdkit-shim.h"
#include "sigv4.h"

unsigned cos_list_max_keys = 1000;

static int
delete_key (struct s3 *s3, const char *key, struct csi_err *e)
{
  struct s3_io io = { .method = "DELETE", .key = key, .missing_ok = true };
  int r;

  csi_shim_clear_error ();
  r = s3_do (s3, &io);
  free (io.text);
  return r == -1 ? cos_s3_fail (e) : 0;
}

/* GET one page of the listing of PREFIX after TOKEN ("" first). */
static int
list_page (struct s3 *s3, const char *prefix, const char *token,
           struct s3_io *io, struct csi_err *e)
{
  char *ep = sigv4_uri_encode (prefix, 0);
  char *et = sigv4_uri_encode (token, 0);
  char *query = NULL;
  int r = -1;

  if (ep && et
      && asprintf (&query, "list-type=2&max-keys=%u&prefix=%s%s%s",
                   cos_list_max_keys, ep,
                   token[0] ? "&continuation-token=" : "", token[0] ? et : "")
             != -1)
    {
      *io = (struct s3_io){ .method = "GET", .key = NULL, .query = query };
      csi_shim_clear_error ();
      r = s3_do (s3, io) == -1 ? cos_s3_fail (e) : 0;
      if (r == -1)
        free (io->text);
    }
  else
    {
      query = NULL;
      csi_fail (e, CSI_INTERNAL, "out of memory");
    }
  free (ep);
  free (et);
  free (query);
  return r;
}

/* Delete the keys of one page, but METADATA; the next page's token in
 * TOKEN ("" when this was the last).
 */
static int
delete_page (struct s3 *s3, const struct s3_io *io, const char *metadata,
             char *token, size_t tokensz, struct csi_err *e)
{
  char key[KEY_MAX], trunc[16];
  size_t pos = 0;
  int r;

  while (
      (r = s3_xml_next (io->text, io->text_len, &pos, "Key", key, sizeof key))
      == 1)
    if (strcmp (key, metadata) != 0 && delete_key (s3, key, e) == -1)
      return -1;
  if (r == -1)
    return csi_fail (e, CSI_INTERNAL, "cos: malformed listing");
  pos = 0;
  token[0] = '\0';
  if (s3_xml_next (io->text, io->text_len, &pos, "IsTruncated", trunc,
                   sizeof trunc)
          == 1
      && strcmp (trunc, "true") == 0)
    {
      pos = 0;
      if (s3_xml_next (io->text, io->text_len, &pos, "NextContinuationToken",
                       token, tokensz)
          != 1)
        return csi_fail (e, CSI_INTERNAL,
                         "cos: a truncated listing without a token");
    }
  return 0;
}

static int
delete_in (struct s3 *s3, const struct csi_volid *v, struct csi_err *e)
{
  char prefix[KEY_MAX], metadata[KEY_MAX], owner[256], token[2048] = "";
  struct s3_io io;
  int r;

  r = cos_read_claim (s3, v, owner, sizeof owner, e);
  if (r != 0)
    return r == 1 ? cos_claimed (v, owner, e) : -1;
  cos_key (v, "", prefix, sizeof prefix);
  cos_key (v, "volume.json", metadata, sizeof metadata);
  do
    {
      if (list_page (s3, prefix, token, &io, e) == -1)
        return -1;
      r = delete_page (s3, &io, metadata, token, sizeof token, e);
      free (io.text);
      if (r == -1)
        return -1;
    }
  while (token[0]);
  return delete_key (s3, metadata, e);
}

int
cos_delete (const struct csi_volid *v, const struct csi_map *secrets,
            struct csi_err *e)
{
  struct s3 *s3 = cos_open (v, secrets, e);
  int r;

  if (s3 == NULL)
    return -1;
  r = delete_in (s3, v, e);
  s3_close (s3);
  return r;
}
