//! The `rill` command line: `rill serve` and its flags.
//!
//! Every flag is documented in `--help`; clap refuses an unknown or
//! malformed flag with a message and exit code 2. [`ServeArgs::resolve`]
//! turns the flags into the engine's [`Config`], the server's
//! [`ServeOptions`] and the address to listen on, refusing impossible
//! combinations with a message (the engine checks its own limits again
//! when it opens).

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use super::state::ServeOptions;
use crate::{Config, Durability, WalIo};

/// rill: durable append-only streams, served over HTTP with the Durable
/// Streams protocol.
#[derive(Debug, Parser)]
#[command(name = "rill", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Parses the process's arguments; prints help, the version or a usage
    /// error and exits (code 2 for an error) when that is what they ask for.
    pub fn from_env() -> Cli {
        <Cli as Parser>::parse()
    }
}

/// The subcommands.
// Parsed once per process: the size of the `serve` flags does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Open (or create) a data directory and serve it over HTTP/1.1.
    Serve(ServeArgs),
    /// Show or change a running cluster's members, through any member's
    /// HTTP address.
    #[command(subcommand)]
    Cluster(ClusterCommand),
}

/// `rill cluster ...`: each prints the cluster as the server answers it
/// (JSON) on stdout; a refusal is printed on stderr with exit code 1.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Every group's membership and leader, as the server sees them.
    Status {
        /// Any member's HTTP address, HOST:PORT.
        #[arg(long, value_name = "ADDR")]
        server: String,
    },
    /// Add a node (started with `rill serve --join`) to every group.
    Add {
        /// Any member's HTTP address, HOST:PORT.
        #[arg(long, value_name = "ADDR")]
        server: String,
        /// The new node: ID=RAFT_ADDR@HTTP_ADDR.
        #[arg(value_name = "ID=RAFT_ADDR@HTTP_ADDR")]
        member: String,
        /// How long each group may take, in ms.
        #[arg(long, value_name = "MS", default_value_t = 60_000)]
        wait_ms: u64,
    },
    /// Remove a node from every group.
    Remove {
        /// Any member's HTTP address, HOST:PORT.
        #[arg(long, value_name = "ADDR")]
        server: String,
        /// The node that leaves.
        #[arg(value_name = "ID")]
        id: u64,
        /// How long each group may take, in ms.
        #[arg(long, value_name = "MS", default_value_t = 60_000)]
        wait_ms: u64,
    },
    /// Put a new node (started with `rill serve --join`) in an old one's
    /// place in every group, through joint consensus.
    Replace {
        /// Any member's HTTP address, HOST:PORT.
        #[arg(long, value_name = "ADDR")]
        server: String,
        /// The node that leaves.
        #[arg(value_name = "OLD_ID")]
        old: u64,
        /// The node that takes its place: ID=RAFT_ADDR@HTTP_ADDR.
        #[arg(value_name = "ID=RAFT_ADDR@HTTP_ADDR")]
        member: String,
        /// How long each group may take, in ms.
        #[arg(long, value_name = "MS", default_value_t = 60_000)]
        wait_ms: u64,
    },
}

/// When the engine acknowledges a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DurabilityArg {
    /// After the write is fdatasync'ed (survives power loss).
    Fsync,
    /// After the write reached the page cache; synced every
    /// --sync-interval-ms (survives a process crash, may lose that interval
    /// on power loss).
    Interval,
}

/// How WAL files are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum WalIoArg {
    /// O_DIRECT through io_uring (with --durability interval: as buffered).
    Dma,
    /// std::fs writes, for file systems without O_DIRECT (tmpfs).
    Std,
    /// Buffered pwrite into the page cache on the core.
    Buffered,
    /// A shared memory mapping of the segments (the page cache).
    Mapped,
}

/// The flags of `rill serve` (`--help` lists them).
#[derive(Clone, Debug, Args)]
pub struct ServeArgs {
    /// Data directory (created if missing; one server per directory).
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// Address to listen on, HOST:PORT (port 0 picks a free port; the
    /// chosen address is printed on stdout).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:4437")]
    pub listen: String,
    /// How long a long-poll waits for data before answering 204, in ms
    /// (also the longest quiet gap in an SSE stream before a keep-alive).
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    pub long_poll_timeout_ms: u64,
    /// Executor cores (one pinned thread each; default: online CPUs).
    #[arg(long, value_name = "N")]
    pub cores: Option<usize>,
    /// Groups; fixed for the life of the data directory.
    #[arg(long, value_name = "N", default_value_t = crate::DEFAULT_GROUPS)]
    pub groups: u32,
    /// When writes are acknowledged.
    #[arg(long, value_enum, default_value_t = DurabilityArg::Fsync)]
    pub durability: DurabilityArg,
    /// Sync interval of --durability interval, in ms.
    #[arg(long, value_name = "MS", default_value_t = 5)]
    pub sync_interval_ms: u64,
    /// How WAL segment files are written.
    #[arg(long, value_enum, default_value_t = WalIoArg::Dma)]
    pub wal_io: WalIoArg,
    /// Largest request body (and engine payload), in bytes; larger gets 413.
    #[arg(long, value_name = "BYTES", default_value_t = 16 << 20)]
    pub max_body_bytes: u64,
    /// Most bytes one read returns (the client continues from the offset
    /// it is given).
    #[arg(long, value_name = "BYTES", default_value_t = 4 << 20)]
    pub max_read_bytes: usize,
    /// Open connections per core; more are closed as soon as accepted.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub max_connections_per_core: usize,
    /// A client must send a request's headers within this, in ms.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    pub header_read_timeout_ms: u64,
    /// On SIGINT/SIGTERM, how long open requests may take to finish, in ms.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    pub drain_timeout_ms: u64,
    /// Mail queued per core (see the engine's limits).
    #[arg(long, value_name = "N")]
    pub mailbox_capacity: Option<usize>,
    /// Parked live readers (long-polls, SSE waits) per core; more get 503.
    #[arg(long, value_name = "N")]
    pub live_waiters_per_core: Option<usize>,
    /// Hot (not yet flushed) bytes per group before appends get 503.
    #[arg(long, value_name = "BYTES")]
    pub max_hot_bytes_per_group: Option<u64>,
    /// Bytes per group waiting for the WAL before appends get 503.
    #[arg(long, value_name = "BYTES")]
    pub max_uncommitted_bytes_per_group: Option<u64>,
    /// Streams per group.
    #[arg(long, value_name = "N")]
    pub max_streams_per_group: Option<u64>,
    /// How often each core removes expired streams, in ms.
    #[arg(long, value_name = "MS")]
    pub expiry_sweep_interval_ms: Option<u64>,
    /// Do not pin the executor threads to CPUs.
    #[arg(long)]
    pub no_pin: bool,
    /// This node's id in the cluster (with `--cluster`).
    #[arg(long, value_name = "N", requires = "cluster")]
    pub node_id: Option<u64>,
    /// Every member of the cluster, this node included:
    /// `1=RAFT_ADDR@HTTP_ADDR,2=RAFT_ADDR@HTTP_ADDR,3=...`. Node N takes
    /// raft traffic on its own entry's RAFT_ADDR. Without it the server is
    /// a single node.
    #[arg(long, value_name = "MEMBERS", requires = "node_id")]
    pub cluster: Option<String>,
    /// How long a replicated request may wait for a quorum before a 503,
    /// in ms.
    #[arg(long, value_name = "MS", default_value_t = 5_000)]
    pub request_timeout_ms: u64,
    /// Bind the raft listener here instead of this node's own RAFT_ADDR
    /// in --cluster, which stays the address peers dial (for a proxy, a NAT
    /// or a port forward in between).
    #[arg(long, value_name = "ADDR", requires = "cluster")]
    pub raft_listen: Option<SocketAddr>,
    /// Leave each group's leadership where elections put it, instead of
    /// moving it to the group's preferred node (the members in id order,
    /// one group after another). Give every node the same setting.
    #[arg(long, requires = "cluster")]
    pub no_balance_leaders: bool,
    /// Join a running cluster instead of forming one: start with no groups
    /// and wait until a member adds this node (`rill cluster add` or
    /// `replace`). --cluster must name this node and at least one member.
    /// Read on the first start of an empty data directory only.
    #[arg(long, requires = "cluster")]
    pub join: bool,
}

/// Everything `rill serve` needs, from the flags.
#[derive(Debug)]
pub struct Resolved {
    /// The engine's configuration.
    pub config: Config,
    /// The HTTP layer's options.
    pub options: ServeOptions,
    /// The address to listen on.
    pub addr: SocketAddr,
}

impl ServeArgs {
    /// Checks the flags and turns them into a configuration and an address.
    pub fn resolve(&self) -> Result<Resolved, String> {
        let addr = self
            .listen
            .to_socket_addrs()
            .map_err(|e| format!("--listen {:?} is not an address: {e}", self.listen))?
            .next()
            .ok_or_else(|| format!("--listen {:?} resolves to no address", self.listen))?;
        if self.long_poll_timeout_ms == 0 {
            return Err("--long-poll-timeout-ms must be at least 1".into());
        }
        if self.max_body_bytes == 0 || self.max_read_bytes == 0 {
            return Err("--max-body-bytes and --max-read-bytes must be positive".into());
        }
        let mut config = Config::new(&self.dir).groups(self.groups).max_payload_bytes(self.max_body_bytes);
        if let Some(c) = self.cores {
            config = config.cores(c);
        }
        config = config.durability(match self.durability {
            DurabilityArg::Fsync => Durability::Fsync,
            DurabilityArg::Interval => {
                Durability::Interval(Duration::from_millis(self.sync_interval_ms.max(1)))
            }
        });
        config = config.wal_io(match self.wal_io {
            WalIoArg::Dma => WalIo::Dma,
            WalIoArg::Std => WalIo::Std,
            WalIoArg::Buffered => WalIo::Buffered,
            WalIoArg::Mapped => WalIo::Mapped,
        });
        if let Some(v) = self.mailbox_capacity {
            config = config.mailbox_capacity(v);
        }
        if let Some(v) = self.live_waiters_per_core {
            config = config.live_waiters_per_core(v);
        }
        if let Some(v) = self.max_hot_bytes_per_group {
            config = config.max_hot_bytes_per_group(v);
        }
        if let Some(v) = self.max_uncommitted_bytes_per_group {
            config = config.max_uncommitted_bytes_per_group(v);
        }
        if let Some(v) = self.max_streams_per_group {
            config = config.max_streams_per_group(v);
        }
        if let Some(v) = self.expiry_sweep_interval_ms {
            config = config.expiry_sweep_interval_ms(v);
        }
        if self.no_pin {
            config = config.pin_threads(false);
        }
        if let (Some(node), Some(members)) = (self.node_id, &self.cluster) {
            let cluster = crate::ClusterConfig::new(node)
                .parse_members(members)
                .map_err(|e| format!("--cluster: {e}"))?
                .request_timeout(Duration::from_millis(self.request_timeout_ms.max(1)));
            let cluster = match self.raft_listen {
                Some(addr) => cluster.raft_listen(addr),
                None => cluster,
            }
            .balance_leaders(!self.no_balance_leaders)
            .join(self.join);
            config = config.cluster(cluster);
        }
        let options = ServeOptions {
            long_poll_timeout: Duration::from_millis(self.long_poll_timeout_ms),
            max_body_bytes: self.max_body_bytes as usize,
            max_read_bytes: self.max_read_bytes,
            max_connections_per_core: self.max_connections_per_core,
            header_read_timeout: Duration::from_millis(self.header_read_timeout_ms.max(1)),
            drain_timeout: Duration::from_millis(self.drain_timeout_ms),
        };
        Ok(Resolved { config, options, addr })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("rill").chain(args.iter().copied()))
    }

    #[test]
    fn serve_flags_resolve() {
        let cli = parse(&[
            "serve",
            "--dir",
            "/tmp/x",
            "--listen",
            "127.0.0.1:0",
            "--long-poll-timeout-ms",
            "500",
            "--cores",
            "1",
        ])
        .unwrap();
        let Command::Serve(args) = cli.command else { panic!("not serve") };
        let r = args.resolve().unwrap();
        assert_eq!(r.options.long_poll_timeout, Duration::from_millis(500));
        assert_eq!(r.addr.port(), 0);
        assert_eq!(r.config.data_dir(), std::path::Path::new("/tmp/x"));
    }

    #[test]
    fn raft_listen_binds_behind_the_member_address() {
        let members = "1=127.0.0.1:7001@127.0.0.1:4437,2=127.0.0.1:7002@127.0.0.1:4438";
        let base = ["serve", "--dir", "d", "--node-id", "1", "--cluster", members];
        let Command::Serve(args) = parse(&base).unwrap().command else { panic!("not serve") };
        let cluster = args.resolve().unwrap().config.cluster_config().cloned().expect("a cluster");
        assert_eq!(cluster.raft_bind().unwrap(), "127.0.0.1:7001".parse().unwrap());
        let with: Vec<&str> = base.iter().copied().chain(["--raft-listen", "127.0.0.1:9001"]).collect();
        let Command::Serve(args) = parse(&with).unwrap().command else { panic!("not serve") };
        let cluster = args.resolve().unwrap().config.cluster_config().cloned().expect("a cluster");
        assert_eq!(cluster.raft_bind().unwrap(), "127.0.0.1:9001".parse().unwrap());
        assert_eq!(
            cluster.members()[&1].raft_addr,
            "127.0.0.1:7001".parse().unwrap(),
            "peers still dial the entry"
        );
        assert!(cluster.balance_leaders, "leaders are balanced by default");
        let off: Vec<&str> = base.iter().copied().chain(["--no-balance-leaders"]).collect();
        let Command::Serve(args) = parse(&off).unwrap().command else { panic!("not serve") };
        assert!(!args.resolve().unwrap().config.cluster_config().expect("a cluster").balance_leaders);
        assert!(
            parse(&["serve", "--dir", "d", "--raft-listen", "127.0.0.1:9001"]).is_err(),
            "needs --cluster"
        );
        assert!(parse(&[&base[..], &["--raft-listen", "nowhere"]].concat()).is_err());
        assert!(
            !args.resolve().unwrap().config.cluster_config().expect("a cluster").join,
            "forming by default"
        );
        let join: Vec<&str> = base.iter().copied().chain(["--join"]).collect();
        let Command::Serve(args) = parse(&join).unwrap().command else { panic!("not serve") };
        assert!(args.resolve().unwrap().config.cluster_config().expect("a cluster").join);
        assert!(parse(&["serve", "--dir", "d", "--join"]).is_err(), "--join needs --cluster");
    }

    #[test]
    fn cluster_subcommands_parse() {
        let Command::Cluster(ClusterCommand::Replace { server, old, member, wait_ms }) = parse(&[
            "cluster",
            "replace",
            "--server",
            "127.0.0.1:4437",
            "3",
            "4=127.0.0.1:7004@127.0.0.1:4440",
        ])
        .unwrap()
        .command
        else {
            panic!("not cluster replace")
        };
        assert_eq!(
            (server.as_str(), old, member.as_str(), wait_ms),
            ("127.0.0.1:4437", 3, "4=127.0.0.1:7004@127.0.0.1:4440", 60_000)
        );
        assert!(parse(&["cluster", "remove", "--server", "h:1", "x"]).is_err(), "a node id is a number");
        assert!(parse(&["cluster", "status"]).is_err(), "--server is required");
    }

    #[test]
    fn bad_flags_are_refused() {
        assert!(parse(&["serve"]).is_err());
        assert!(parse(&["serve", "--dir", "d", "--bogus"]).is_err());
        assert!(parse(&["serve", "--dir", "d", "--long-poll-timeout-ms", "soon"]).is_err());
        let Command::Serve(args) =
            parse(&["serve", "--dir", "d", "--listen", "not an address"]).unwrap().command
        else {
            panic!("not serve")
        };
        assert!(args.resolve().unwrap_err().contains("--listen"));
        let Command::Serve(args) =
            parse(&["serve", "--dir", "d", "--long-poll-timeout-ms", "0"]).unwrap().command
        else {
            panic!("not serve")
        };
        assert!(args.resolve().is_err());
    }
}
