// hhc-csi: the CSI driver of HHC gateway (hhc-csi(8)).
//
//   hhc-csi --endpoint=unix:///csi/csi.sock --nodeid=NAME [--config=FILE]
//   hhc-csi --check [--config=FILE]
//
// One process serves Identity, Controller and Node on one Unix socket,
// as the CSI sidecars expect; the controller Deployment and the node
// DaemonSet run the same binary with the same config file.
#include <config.h>

#include <getopt.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "svc.h"

namespace
{

struct Options {
  std::string endpoint, node_id, config = CSI_DEFAULT_CONFIG;
  bool config_given = false, check = false;
};

void
usage (FILE *f)
{
  fprintf (f,
           "usage: hhc-csi --endpoint=unix:///PATH --nodeid=NAME "
           "[--config=FILE]\n"
           "       hhc-csi --check [--config=FILE]\n"
           "The config file defaults to %s; see hhc-csi(8).\n",
           CSI_DEFAULT_CONFIG);
}

// 0: run; 1: exit 0 (--help, --version); -1: exit 2 (usage error).
int
parse_args (int argc, char **argv, Options *o)
{
  static const struct option opts[]
      = { { "endpoint", required_argument, nullptr, 'e' },
          { "nodeid", required_argument, nullptr, 'n' },
          { "config", required_argument, nullptr, 'c' },
          { "check", no_argument, nullptr, 'k' },
          { "help", no_argument, nullptr, 'h' },
          { "version", no_argument, nullptr, 'V' },
          { nullptr, 0, nullptr, 0 } };
  int c;

  while ((c = getopt_long (argc, argv, "", opts, nullptr)) != -1)
    switch (c)
      {
      case 'e':
        o->endpoint = optarg;
        break;
      case 'n':
        o->node_id = optarg;
        break;
      case 'c':
        o->config = optarg;
        o->config_given = true;
        break;
      case 'k':
        o->check = true;
        break;
      case 'h':
        usage (stdout);
        return 1;
      case 'V':
        printf ("hhc-csi %s (%s)\n", PACKAGE_VERSION, CSI_DRIVER_NAME);
        return 1;
      default:
        usage (stderr);
        return -1;
      }
  if (optind < argc)
    {
      fprintf (stderr, "hhc-csi: unexpected argument '%s'\n", argv[optind]);
      return -1;
    }
  if (!o->check && (o->endpoint.empty () || o->node_id.empty ()))
    {
      fprintf (stderr, "hhc-csi: --endpoint and --nodeid are required "
                       "(try 'hhc-csi --help')\n");
      return -1;
    }
  return 0;
}

// The path of "unix:///PATH" or "unix:/PATH"; "" if not such.
std::string
socket_path (const std::string &endpoint)
{
  if (endpoint.rfind ("unix://", 0) == 0)
    return endpoint.substr (7);
  if (endpoint.rfind ("unix:", 0) == 0)
    return endpoint.substr (5);
  return "";
}

// Read the config: a missing default file leaves the driver
// unconfigured (Identity and the capability calls answer); a named
// file that cannot be read, or any invalid file, is an error.
bool
load_config (const Options &o, hhccsi::Driver *d)
{
  char err[512];

  d->config_file = o.config;
  if (!o.config_given && access (o.config.c_str (), F_OK) == -1
      && errno == ENOENT && !o.check)
    {
      csi_log ("%s: no such file: serving Identity and the capability "
               "calls only",
               o.config.c_str ());
      return true;
    }
  if (csi_conf_load (o.config.c_str (), &d->conf, err, sizeof err) == -1)
    {
      fprintf (stderr, "hhc-csi: %s\n", err);
      return false;
    }
  d->configured = true;
  return true;
}

// Stop the server on SIGTERM or SIGINT (blocked in every thread; this
// one waits for them).
void
wait_for_signal (grpc::Server *server)
{
  sigset_t set;
  int sig;

  sigemptyset (&set);
  sigaddset (&set, SIGTERM);
  sigaddset (&set, SIGINT);
  sigwait (&set, &sig);
  csi_log ("signal %d: stopping", sig);
  server->Shutdown ();
}

} // namespace

int
main (int argc, char **argv)
{
  Options o;
  hhccsi::Driver d;
  int r = parse_args (argc, argv, &o);

  if (r != 0)
    return r > 0 ? 0 : 2;
  if (!load_config (o, &d))
    return 1;
  if (o.check)
    return 0;
  std::string path = socket_path (o.endpoint);
  if (path.empty () || path[0] != '/')
    {
      fprintf (stderr, "hhc-csi: --endpoint=%s: expected unix:///PATH\n",
               o.endpoint.c_str ());
      return 2;
    }
  if (unlink (path.c_str ()) == -1 && errno != ENOENT)
    {
      fprintf (stderr, "hhc-csi: %s: %s\n", path.c_str (), strerror (errno));
      return 1;
    }
  d.node_id = o.node_id;

  sigset_t set;
  sigemptyset (&set);
  sigaddset (&set, SIGTERM);
  sigaddset (&set, SIGINT);
  pthread_sigmask (SIG_BLOCK, &set, nullptr);
  signal (SIGPIPE, SIG_IGN);

  auto identity = hhccsi::make_identity (d);
  auto controller = hhccsi::make_controller (d);
  auto node = hhccsi::make_node (d);
  grpc::ServerBuilder b;
  b.AddListeningPort ("unix:" + path, grpc::InsecureServerCredentials ());
  b.RegisterService (identity.get ());
  b.RegisterService (controller.get ());
  b.RegisterService (node.get ());
  std::unique_ptr<grpc::Server> server = b.BuildAndStart ();
  if (!server)
    {
      fprintf (stderr, "hhc-csi: cannot listen on %s\n", path.c_str ());
      return 1;
    }
  chmod (path.c_str (), 0660);
  csi_log ("%s %s serving on %s, node %s", CSI_DRIVER_NAME, PACKAGE_VERSION,
           path.c_str (), d.node_id.c_str ());
  std::thread t (wait_for_signal, server.get ());
  server->Wait ();
  t.join ();
  if (d.configured)
    csi_conf_free (&d.conf);
  unlink (path.c_str ());
  return 0;
}
