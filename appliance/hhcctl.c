/* hhcctl: the gateway's admin tool (hhcctl(8)); hhcctl.h lists the
 * commands' files.
 *
 *   hhcctl check   --cache PATH [--log PATH...]   verify, read-only
 *   hhcctl format  --cache PATH [--log PATH...] [--force]
 *   hhcctl mttdl   [--disks N] [--log-disks M] [--mttf-hdd H] ... [--json]
 *   hhcctl recover --log PATH [--log PATH...] --backend PATH|NBD-URI
 *   hhcctl status  [--run-dir DIR] [--json]
 *   hhcctl drain   [--run-dir DIR] [--quiet] VOLUME
 *   hhcctl volume  add|remove|list [--config FILE] [--wait S] ...
 */
#include <config.h>

#include <getopt.h>
#include <string.h>

#include "hhcctl.h"
#include "hhcctl-live.h"
#include "hhcctl-volume.h"

struct command {
  const char *name;
  int (*run) (int argc, char **argv);
  const char *synopsis; /* after "hhcctl NAME" */
  const char *summary;
};

static const struct command commands[] = {
  /* Offline: devices no gateway has open. */
  { "check", cmd_check, "--cache PATH [--log PATH...]",
    "verify a cache and its log without changing them" },
  { "format", cmd_format, "[--cache PATH] [--log PATH...] [--force]",
    "make the devices blank (the next start formats them)" },
  { "recover", cmd_recover, "--log PATH... --backend PATH|NBD-URI",
    "replay the log into the backend (the SSD is lost)" },
  /* Arithmetic. */
  { "mttdl", cmd_mttdl, "[--disks N] [--log-disks M] [--json] ...",
    "MTTDL of RAID5/6 and HHC (Markov model)" },
  /* A running gateway (hhcctl-live.c). */
  { "status", hhcctl_status, "[--run-dir DIR] [--json]",
    "the volumes of a running hhc-gateway" },
  { "drain", hhcctl_drain, "[--run-dir DIR] [--quiet] VOLUME",
    "write back every dirty block of a volume (progress bar)" },
  { "volume", hhcctl_volume, "add|remove|list [--config FILE] ...",
    "add or remove a volume of a running hhc-gateway (volumes_dir)" },
};

static void
usage (FILE *f)
{
  fprintf (f, "usage: hhcctl COMMAND [OPTION...]\n\nCommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf (f, "  %-8s %s\n  %-8s   %s\n", commands[i].name,
             commands[i].synopsis, "", commands[i].summary);
  fprintf (f, "\n'hhcctl COMMAND --help' describes a command's options.  "
              "See hhcctl(8).\n");
}

int
main (int argc, char **argv)
{
  static char name[64];

  if (argc < 2)
    {
      usage (stderr);
      return 2;
    }
  if (strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0
      || strcmp (argv[1], "help") == 0)
    {
      usage (stdout);
      return 0;
    }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp (argv[1], commands[i].name) == 0)
      {
        snprintf (name, sizeof name, "hhcctl %s", commands[i].name);
        cmd_name = name;
        opterr = 0;
        return commands[i].run (argc - 1, argv + 1);
      }
  fprintf (stderr, "hhcctl: unknown command '%s' (try 'hhcctl --help')\n",
           argv[1]);
  return 2;
}
