//! Redis commands in the RESP protocol, many to one buffer: what redis-py's pipeline packs
//! one argument at a time in Python (index/redis/resp.py).

/// Append one command, `*<n>\r\n` then `$<len>\r\n<arg>\r\n` for each argument.
pub fn command(args: &[&[u8]], out: &mut Vec<u8>) {
    header(b'*', args.len(), out);
    for arg in args {
        header(b'$', arg.len(), out);
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

fn header(kind: u8, n: usize, out: &mut Vec<u8>) {
    out.push(kind);
    out.extend_from_slice(n.to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_like_the_protocol() {
        let mut out = vec![];
        command(&[b"SET", b"k", b""], &mut out);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
    }
}
