//! `auto-swe-netbridge LISTEN SOCKET`: the bridge a proxied workspace runs inside, carrying
//! TCP connections on `LISTEN` to its egress proxy's Unix socket (see
//! `auto_swe_sandbox::bridge`).

fn main() -> std::process::ExitCode {
    auto_swe_sandbox::bridge::bridge_main(std::env::args_os())
}
