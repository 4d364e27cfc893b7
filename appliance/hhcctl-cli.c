/* hhcctl's messages and command-line helpers, shared by the commands:
 * check's report lines, the core's messages, usage errors.
 */
#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <string.h>

#include "hhcctl.h"

bool quiet;
bool quiet_core;
const char *cmd_name = "hhcctl";
struct report *report;

/* ---- messages ---- */

static void
report_line (const char *kind, const char *fmt, va_list ap)
{
  fputs (kind, stdout);
  vprintf (fmt, ap);
  putchar ('\n');
}

void
note (const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  report_line ("", fmt, ap);
  va_end (ap);
}

void
problem (const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  report_line ("error: ", fmt, ap);
  va_end (ap);
  if (report)
    report->problems++;
}

void
warning (const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  report_line ("warning: ", fmt, ap);
  va_end (ap);
  if (report)
    report->warnings++;
}

void
msg_cb (enum hhc_msg_level level, const char *msg)
{
  if (report)
    {
      if (level == HHC_MSG_ERROR)
        problem ("%s", msg);
      else if (level == HHC_MSG_WARNING)
        warning ("%s", msg);
      else if (level == HHC_MSG_INFO && !quiet_core)
        note ("%s", msg);
      return;
    }
  if (level == HHC_MSG_DEBUG
      || ((quiet || quiet_core) && level == HHC_MSG_INFO))
    return;
  fprintf (stderr, "hhcctl: %s%s\n", level == HHC_MSG_ERROR ? "error: " : "",
           msg);
}

/* ---- command lines ---- */

int
usage_error (const char *fmt, ...)
{
  va_list ap;

  fprintf (stderr, "%s: ", cmd_name);
  va_start (ap, fmt);
  vfprintf (stderr, fmt, ap);
  va_end (ap);
  fprintf (stderr, " (try '%s --help')\n", cmd_name);
  return 2;
}

int
bad_option (int c, char **argv)
{
  const char *arg = argv[optind - 1];

  if (c == ':')
    return usage_error ("option '%s' needs a value", arg);
  if (optopt && strncmp (arg, "--", 2) != 0)
    return usage_error ("unknown option '-%c'", optopt);
  return usage_error ("unknown option '%s'", arg);
}

int
add_log (const char **logs, unsigned *nlogs, const char *path)
{
  if (*nlogs == HHC_MAX_LOGS)
    return usage_error ("--log may be given at most %d times", HHC_MAX_LOGS);
  logs[(*nlogs)++] = path;
  return 0;
}
