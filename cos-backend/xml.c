/* cos-backend: the little XML reading S3 answers need.
 *
 * S3 answers are flat documents (Error, ListBucketResult); the plugin
 * only ever wants the text of elements by name: <Code>, <Message>,
 * <RequestId>, <Key>, <IsTruncated>, <NextContinuationToken>.  This
 * scanner finds them without building a tree.  It never reads outside
 * [xml, xml+len), whatever the bytes are (the fuzzer checks that).
 */
#include <config.h>

#include <stdbool.h>
#include <string.h>

#include "s3.h"

/* Find NEEDLE (length N) in HAY[from..len). */
static const char *
find (const char *hay, size_t len, size_t from, const char *needle, size_t n)
{
  if (from > len || n > len - from)
    return NULL;
  return memmem (hay + from, len - from, needle, n);
}

/* Decode the entities S3 uses (&amp; &lt; &gt; &quot; &apos; and
 * numeric &#NN; / &#xHH; for ASCII) from S[0..n) into OUT.
 */
static int
decode (const char *s, size_t n, char *out, size_t outsz)
{
  static const struct {
    const char *name;
    char c;
  } ents[] = {
    { "amp;", '&' },  { "lt;", '<' },    { "gt;", '>' },
    { "quot;", '"' }, { "apos;", '\'' },
  };
  size_t o = 0;

  for (size_t i = 0; i < n;)
    {
      char c = s[i];
      if (c == '&')
        {
          size_t rest = n - i - 1;
          const char *e = s + i + 1;
          bool ok = false;
          for (size_t k = 0; k < sizeof ents / sizeof ents[0]; k++)
            {
              size_t l = strlen (ents[k].name);
              if (rest >= l && memcmp (e, ents[k].name, l) == 0)
                {
                  c = ents[k].c;
                  i += 1 + l;
                  ok = true;
                  break;
                }
            }
          if (!ok && rest >= 3 && e[0] == '#')
            {
              unsigned v = 0;
              size_t j = 1;
              bool hex = e[1] == 'x' || e[1] == 'X';
              if (hex)
                j++;
              size_t digits = 0;
              for (; j < rest && e[j] != ';' && digits < 6; j++, digits++)
                {
                  char d = e[j];
                  if (d >= '0' && d <= '9')
                    v = v * (hex ? 16 : 10) + (d - '0');
                  else if (hex && d >= 'a' && d <= 'f')
                    v = v * 16 + (d - 'a' + 10);
                  else if (hex && d >= 'A' && d <= 'F')
                    v = v * 16 + (d - 'A' + 10);
                  else
                    return -1;
                }
              if (j >= rest || e[j] != ';' || digits == 0 || v == 0 || v > 127)
                return -1;
              c = (char)v;
              i += 1 + j + 1;
              ok = true;
            }
          if (!ok)
            return -1;
        }
      else
        i++;
      if (o + 1 >= outsz)
        return -1;
      out[o++] = c;
    }
  if (outsz == 0)
    return -1;
  out[o] = '\0';
  return 0;
}

int
s3_xml_next (const char *xml, size_t len, size_t *pos, const char *tag,
             char *out, size_t outsz)
{
  char open[80], close[80];
  size_t tl = strlen (tag);
  const char *a, *b;
  size_t from = *pos;

  if (tl == 0 || tl + 4 > sizeof open || xml == NULL)
    return -1;
  open[0] = '<';
  memcpy (open + 1, tag, tl);
  open[tl + 1] = '>';
  close[0] = '<';
  close[1] = '/';
  memcpy (close + 2, tag, tl);
  close[tl + 2] = '>';

  a = find (xml, len, from, open, tl + 2);
  if (a == NULL)
    {
      /* An empty element <Tag/> counts as found with empty text. */
      char empty[80];
      empty[0] = '<';
      memcpy (empty + 1, tag, tl);
      memcpy (empty + 1 + tl, "/>", 2);
      const char *e = find (xml, len, from, empty, tl + 3);
      if (e == NULL)
        return 0;
      if (outsz == 0)
        return -1;
      out[0] = '\0';
      *pos = (e - xml) + tl + 3;
      return 1;
    }
  size_t start = (a - xml) + tl + 2;
  b = find (xml, len, start, close, tl + 3);
  if (b == NULL)
    return -1;
  /* Element text must not hold markup for the elements we read. */
  if (memchr (xml + start, '<', b - (xml + start)) != NULL)
    return -1;
  if (decode (xml + start, b - (xml + start), out, outsz) == -1)
    return -1;
  *pos = (b - xml) + tl + 3;
  return 1;
}
