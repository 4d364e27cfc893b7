/* hhcctl mttdl: the MTTDL of RAID5, RAID6 and HHC with 1..M log disks
 * (the Markov model of mttdl.c), as a table or JSON.
 */
#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>

#include "hhcctl.h"
#include "mttdl.h"
#include "parse.h"

/* Defaults: see hhcctl(8), MTTDL MODEL, for the sources. */
#define MTTDL_DEF_DISKS 4
#define MTTDL_DEF_LOG_DISKS 2
#define MTTDL_DEF_HDD 500000.0  /* hours: field AFR of about 1.75% */
#define MTTDL_DEF_SSD 2000000.0 /* hours: enterprise NVMe datasheets */
#define MTTDL_DEF_MTTR 24.0

/* The model's parameters. */
struct mttdl_args {
  unsigned disks, m;
  double hdd, ssd, mttr;
  bool json;
};

struct mttdl_row {
  char name[16];
  char what[48];
  double hours, approx;
};

/* A whole number in the filter's syntax (common/parse.h). */
static int
parse_unsigned (const char *opt, const char *s, unsigned min, unsigned max,
                unsigned *v)
{
  unsigned n;

  if (hhc_parse_unsigned (s, NULL, &n) != NULL || n < min || n > max)
    return usage_error ("%s must be a whole number from %u to %u, not '%s'",
                        opt, min, max, s);
  *v = n;
  return 0;
}

static int
parse_hours (const char *opt, const char *s, double *v)
{
  char *end;
  double d;

  errno = 0;
  d = strtod (s, &end);
  if (errno || end == s || *end || !isfinite (d) || d <= 0)
    return usage_error ("%s must be a positive number of hours, not '%s'", opt,
                        s);
  *v = d;
  return 0;
}

static void
mttdl_usage (FILE *f)
{
  fprintf (f,
           "usage: hhcctl mttdl [--disks N] [--log-disks M] [--mttf-hdd "
           "HOURS]\n"
           "                    [--mttf-ssd HOURS] [--mttr HOURS] [--json]\n"
           "MTTDL of RAID5, RAID6 and HHC with 1..M log disks (Markov "
           "model).\n"
           "Defaults: --disks %d --log-disks %d --mttf-hdd %.0f --mttf-ssd "
           "%.0f --mttr %.0f\n"
           "See hhcctl(8).\n",
           MTTDL_DEF_DISKS, MTTDL_DEF_LOG_DISKS, MTTDL_DEF_HDD, MTTDL_DEF_SSD,
           MTTDL_DEF_MTTR);
}

static void
mttdl_print (const struct mttdl_row *rows, size_t n, const struct mttdl_args *a)
{
  const double y = MTTDL_HOURS_PER_YEAR;

  if (a->json)
    {
      printf ("{\n  \"parameters\": {\"disks\": %u, \"log_disks\": %u, "
              "\"mttf_hdd_hours\": %.17g, \"mttf_ssd_hours\": %.17g, "
              "\"mttr_hours\": %.17g, \"hours_per_year\": %.17g},\n"
              "  \"models\": [\n",
              a->disks, a->m, a->hdd, a->ssd, a->mttr, y);
      for (size_t i = 0; i < n; i++)
        printf ("    {\"name\": \"%s\", \"description\": \"%s\", "
                "\"mttdl_hours\": %.6e, \"mttdl_years\": %.6e, "
                "\"closed_form_years\": %.6e}%s\n",
                rows[i].name, rows[i].what, rows[i].hours, rows[i].hours / y,
                rows[i].approx / y, i + 1 < n ? "," : "");
      printf ("  ]\n}\n");
      return;
    }
  printf ("MTTDL (Markov model): MTTF %.0f h per HDD, %.0f h per SSD, MTTR "
          "%.0f h\n\n",
          a->hdd, a->ssd, a->mttr);
  printf ("%-7s  %-30s  %14s  %14s\n", "model", "", "MTTDL (years)",
          "closed form");
  for (size_t i = 0; i < n; i++)
    printf ("%-7s  %-30s  %14.4g  %14.4g\n", rows[i].name, rows[i].what,
            rows[i].hours / y, rows[i].approx / y);
}

/* The command line into a; -1 to go on, else the exit status. */
static int
mttdl_args (int argc, char **argv, struct mttdl_args *a)
{
  static const struct option opts[] = {
    { "disks", required_argument, NULL, 'n' },
    { "log-disks", required_argument, NULL, 'm' },
    { "mttf-hdd", required_argument, NULL, 'H' },
    { "mttf-ssd", required_argument, NULL, 'S' },
    { "mttr", required_argument, NULL, 'r' },
    { "json", no_argument, NULL, 'j' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  int c, r = 0;

  while ((c = getopt_long (argc, argv, ":n:m:H:S:r:jh", opts, NULL)) != -1)
    {
      switch (c)
        {
        case 'n':
          r = parse_unsigned ("--disks", optarg, 4, MTTDL_MAX_DISKS, &a->disks);
          break;
        case 'm':
          r = parse_unsigned ("--log-disks", optarg, 1, MTTDL_MAX_LOG_DISKS,
                              &a->m);
          break;
        case 'H':
          r = parse_hours ("--mttf-hdd", optarg, &a->hdd);
          break;
        case 'S':
          r = parse_hours ("--mttf-ssd", optarg, &a->ssd);
          break;
        case 'r':
          r = parse_hours ("--mttr", optarg, &a->mttr);
          break;
        case 'j':
          a->json = true;
          break;
        case 'h':
          mttdl_usage (stdout);
          return 0;
        default:
          return bad_option (c, argv);
        }
      if (r)
        return r;
    }
  if (optind != argc)
    return usage_error ("unexpected argument '%s'", argv[optind]);
  return -1;
}

/* The rows of the table: 0, or an errno from the model. */
static int
mttdl_rows (const struct mttdl_args *a, struct mttdl_row *rows, size_t *np)
{
  size_t n = 0;
  int r = 0;

  /* The SSD alone (write-back without a log): its own MTTF. */
  rows[n]
      = (struct mttdl_row){ "SSD", "write-back SSD, no log", a->ssd, a->ssd };
  n++;
  for (unsigned f = 1; f <= 2; f++, n++)
    {
      snprintf (rows[n].name, sizeof rows[n].name, "RAID%u", f + 4);
      snprintf (rows[n].what, sizeof rows[n].what,
                "%u disks, survives %u failure%s", a->disks, f,
                f > 1 ? "s" : "");
      if ((r = mttdl_raid (a->disks, f, a->hdd, a->mttr, &rows[n].hours)) != 0
          || (r = mttdl_raid_approx (a->disks, f, a->hdd, a->mttr,
                                     &rows[n].approx))
                 != 0)
        return r;
    }
  for (unsigned k = 1; k <= a->m; k++, n++)
    {
      snprintf (rows[n].name, sizeof rows[n].name, "HHC-%u", k);
      snprintf (rows[n].what, sizeof rows[n].what, "SSD + %u log disk%s", k,
                k > 1 ? "s" : "");
      if ((r = mttdl_hhc (k, a->hdd, a->ssd, a->mttr, &rows[n].hours)) != 0
          || (r
              = mttdl_hhc_approx (k, a->hdd, a->ssd, a->mttr, &rows[n].approx))
                 != 0)
        return r;
    }
  *np = n;
  return 0;
}

int
cmd_mttdl (int argc, char **argv)
{
  struct mttdl_args a = {
    .disks = MTTDL_DEF_DISKS,
    .m = MTTDL_DEF_LOG_DISKS,
    .hdd = MTTDL_DEF_HDD,
    .ssd = MTTDL_DEF_SSD,
    .mttr = MTTDL_DEF_MTTR,
  };
  struct mttdl_row rows[3 + MTTDL_MAX_LOG_DISKS];
  size_t n = 0;
  int r = mttdl_args (argc, argv, &a);

  if (r >= 0)
    return r;
  r = mttdl_rows (&a, rows, &n);
  if (r)
    {
      fprintf (stderr,
               "hhcctl: error: the model has no answer for these "
               "values (%s)\n",
               r == ERANGE ? "it does not fit in a double" : "out of range");
      return 1;
    }
  mttdl_print (rows, n, &a);
  return 0;
}
