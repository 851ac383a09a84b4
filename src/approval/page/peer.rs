//! Who is on the other end of a loopback connection: the owner of the connecting socket, read
//! from the kernel's socket tables (`/proc/net/tcp`, and `/proc/net/tcp6` for a client whose
//! IPv6 socket reached `::ffff:127.0.0.1`).
//!
//! The row of the client's socket is the one whose local address is the peer's address and
//! port and whose remote address is the listener's; its `uid` column is the socket's owner.
//! A row whose inode is 0 belongs to no open socket (closed by its program, or in TIME_WAIT,
//! where the kernel prints uid 0): it proves no owner and is not used.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The owner's uid of the socket with local address `local` and remote address `remote` in
/// `table` (the text of `/proc/net/tcp` or `/proc/net/tcp6`); `None` when no row with an
/// inode matches.
pub fn owner_in(table: &str, local: SocketAddr, remote: SocketAddr) -> Option<u32> {
    let (local, remote) = (canonical(local), canonical(remote));
    table.lines().skip(1).find_map(|row| {
        let cols: Vec<&str> = row.split_whitespace().collect();
        // sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...
        if cols.len() < 10 {
            return None;
        }
        let matches = parse_addr(cols[1]) == Some(local) && parse_addr(cols[2]) == Some(remote);
        let inode: u64 = cols[9].parse().ok()?;
        (matches && inode != 0)
            .then(|| cols[7].parse().ok())
            .flatten()
    })
}

/// An IPv4-mapped IPv6 address as the IPv4 one.
fn canonical(a: SocketAddr) -> SocketAddr {
    match a.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), a.port()),
            None => a,
        },
        IpAddr::V4(_) => a,
    }
}

/// `0100007F:1F90` (each 32-bit word of the address printed as the host stores it, the port
/// big-endian) as `127.0.0.1:8080`; IPv6 (32 hex digits) as IPv6, mapped IPv4 as IPv4.
fn parse_addr(s: &str) -> Option<SocketAddr> {
    let (addr, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        let w = addr.get(i * 8..i * 8 + 8)?;
        Some(u32::from_str_radix(w, 16).ok()?.to_ne_bytes())
    };
    let ip = match addr.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut bytes = [0u8; 16];
            for i in 0..4 {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(canonical(SocketAddr::new(ip, port)))
}

/// The owner's uid of the client socket `peer` connected to `listener`, from the kernel's
/// tables; `None` when it cannot be found (and on systems without `/proc/net`).
pub async fn owner(peer: SocketAddr, listener: SocketAddr) -> Option<u32> {
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        if let Ok(table) = tokio::fs::read_to_string(file).await
            && let Some(uid) = owner_in(&table, peer, listener)
        {
            return Some(uid);
        }
    }
    None
}

/// This process's effective uid.
pub fn own_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host-order hex the kernel prints for an IPv4 address.
    fn hex4(ip: [u8; 4]) -> String {
        format!("{:08X}", u32::from_ne_bytes(ip))
    }

    fn table(rows: &[(String, String, u32, u64)]) -> String {
        let mut t = String::from(
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n",
        );
        for (i, (l, r, uid, inode)) in rows.iter().enumerate() {
            t.push_str(&format!(
                "{i:4}: {l} {r} 01 00000000:00000000 00:00000000 00000000 {uid:5}        0 {inode} 1 0000000000000000 20 4 30 10 -1\n"
            ));
        }
        t
    }

    #[test]
    fn the_client_row_gives_the_owner_and_the_server_row_does_not() {
        let lo = hex4([127, 0, 0, 1]);
        let peer: SocketAddr = "127.0.0.1:51000".parse().unwrap();
        let listener: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let t = table(&[
            // the listener, the accepted (server) side, then the client side
            (format!("{lo}:1F90"), "00000000:0000".into(), 0, 100),
            (format!("{lo}:1F90"), format!("{lo}:C738"), 0, 101),
            (format!("{lo}:C738"), format!("{lo}:1F90"), 1000, 102),
        ]);
        assert_eq!(owner_in(&t, peer, listener), Some(1000));
        // another port, or the rows swapped, find nothing
        assert_eq!(
            owner_in(&t, "127.0.0.1:51001".parse().unwrap(), listener),
            None
        );
        assert_eq!(owner_in(&t, listener, "127.0.0.1:9".parse().unwrap()), None);
    }

    #[test]
    fn a_row_without_an_inode_proves_no_owner() {
        let lo = hex4([127, 0, 0, 1]);
        let t = table(&[(format!("{lo}:C738"), format!("{lo}:1F90"), 0, 0)]);
        let peer = "127.0.0.1:51000".parse().unwrap();
        assert_eq!(owner_in(&t, peer, "127.0.0.1:8080".parse().unwrap()), None);
    }

    #[test]
    fn an_ipv6_socket_on_a_mapped_ipv4_address_is_found() {
        let mapped = format!(
            "{}{}{}{}",
            hex4([0, 0, 0, 0]),
            hex4([0, 0, 0, 0]),
            hex4([0, 0, 0xff, 0xff]),
            hex4([127, 0, 0, 1])
        );
        let t = table(&[(format!("{mapped}:C738"), format!("{mapped}:1F90"), 65534, 7)]);
        let peer = "127.0.0.1:51000".parse().unwrap();
        assert_eq!(
            owner_in(&t, peer, "127.0.0.1:8080".parse().unwrap()),
            Some(65534)
        );
    }

    #[test]
    fn malformed_rows_are_skipped() {
        let t = "header\ngarbage\n 0: zz:zz 0100007F:1F90 01 0 0 0 x 0 1\n";
        assert_eq!(
            owner_in(
                t,
                "127.0.0.1:1".parse().unwrap(),
                "127.0.0.1:8080".parse().unwrap()
            ),
            None
        );
        assert_eq!(parse_addr("0100007F"), None);
        assert_eq!(parse_addr("0100007:1F90"), None);
    }

    #[tokio::test]
    async fn a_connection_of_this_process_is_owned_by_its_user() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let c = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (_s, peer) = l.accept().await.unwrap();
        assert_eq!(peer, c.local_addr().unwrap());
        assert_eq!(owner(peer, addr).await, Some(own_uid()));
    }
}
