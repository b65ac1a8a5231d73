//! What a write run would destroy: the on-disk signatures of filesystems,
//! partition tables, swap and encrypted volumes at a target's start, as
//! `wipefs` and `blkid` look for them (their magic numbers at fixed
//! offsets). `bfq run --allow-writes` refuses a target that holds one
//! unless `--force-overwrite` is given too; a mounted filesystem and
//! active swap are refused in any case ([`crate::sys::check_not_mounted`]).

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// Bytes read from the target's start: enough for btrfs's superblock
/// (64 KiB + 64) and swap's signature with 64 KiB pages.
pub const HEAD: usize = 68 * 1024;

/// A magic byte string at a fixed offset, and what it names.
struct Magic {
    name: &'static str,
    offset: usize,
    bytes: &'static [u8],
}

/// The signatures looked for (offsets from the target's start; the
/// filesystems' and tables' own specifications, as libblkid reads them).
const MAGICS: &[Magic] = &[
    Magic {
        name: "an ext2/3/4 filesystem",
        offset: 1024 + 56,
        bytes: &[0x53, 0xef],
    },
    Magic {
        name: "an XFS filesystem",
        offset: 0,
        bytes: b"XFSB",
    },
    Magic {
        name: "a btrfs filesystem",
        offset: 65536 + 64,
        bytes: b"_BHRfS_M",
    },
    Magic {
        name: "an F2FS filesystem",
        offset: 1024,
        bytes: &[0x10, 0x20, 0xf5, 0xf2],
    },
    Magic {
        name: "a squashfs filesystem",
        offset: 0,
        bytes: b"hsqs",
    },
    Magic {
        name: "an NTFS filesystem",
        offset: 3,
        bytes: b"NTFS    ",
    },
    Magic {
        name: "a FAT filesystem",
        offset: 54,
        bytes: b"FAT1",
    },
    Magic {
        name: "a FAT32 filesystem",
        offset: 82,
        bytes: b"FAT32   ",
    },
    Magic {
        name: "an exFAT filesystem",
        offset: 3,
        bytes: b"EXFAT   ",
    },
    Magic {
        name: "an ISO 9660 filesystem",
        offset: 32768 + 1,
        bytes: b"CD001",
    },
    Magic {
        name: "a LUKS encrypted volume",
        offset: 0,
        bytes: b"LUKS\xba\xbe",
    },
    Magic {
        name: "an LVM2 physical volume",
        offset: 512 + 24,
        bytes: b"LVM2 001",
    },
    Magic {
        name: "a GPT partition table",
        offset: 512,
        bytes: b"EFI PART",
    },
    Magic {
        name: "a GPT partition table (4 KiB sectors)",
        offset: 4096,
        bytes: b"EFI PART",
    },
];

/// Swap's signature ends each of these page sizes.
const SWAP_PAGES: [usize; 4] = [4096, 8192, 16384, 65536];

/// What `head` (a target's first bytes, shorter if the target is) holds,
/// if anything: a filesystem, partition table, swap area or encrypted
/// volume, named as in an error message.
pub fn find(head: &[u8]) -> Option<&'static str> {
    let at = |offset: usize, bytes: &[u8]| head.get(offset..offset + bytes.len()) == Some(bytes);
    if let Some(m) = MAGICS.iter().find(|m| at(m.offset, m.bytes)) {
        return Some(m.name);
    }
    if SWAP_PAGES
        .iter()
        .any(|p| at(p - 10, b"SWAPSPACE2") || at(p - 10, b"SWAP-SPACE"))
    {
        return Some("a swap area");
    }
    mbr(head).then_some("an MBR partition table")
}

/// An MBR: the boot signature 0x55AA at 510 and at least one partition
/// entry with a type, a boot flag of 0x00 or 0x80 and a size (the
/// signature alone is two bytes any data may hold).
fn mbr(head: &[u8]) -> bool {
    if head.get(510..512) != Some(&[0x55, 0xaa][..]) {
        return false;
    }
    (0..4).any(|i| {
        let e = &head[446 + 16 * i..446 + 16 * (i + 1)];
        let sectors = u32::from_le_bytes([e[12], e[13], e[14], e[15]]);
        (e[0] == 0 || e[0] == 0x80) && e[4] != 0 && sectors != 0
    })
}

/// Refuses `path` (a block device or regular file) when its start holds
/// a signature [`find`] knows, naming it and the flag that allows it.
pub fn check_none(path: &Path) -> io::Result<()> {
    let mut head = Vec::with_capacity(HEAD);
    File::open(path)?.take(HEAD as u64).read_to_end(&mut head)?;
    match find(&head) {
        None => Ok(()),
        Some(what) => Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "{} holds {what}, which the workload's writes would destroy: \
                 refusing without --force-overwrite",
                path.display()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(offset: usize, bytes: &[u8]) -> Vec<u8> {
        let mut v = vec![0u8; HEAD];
        v[offset..offset + bytes.len()].copy_from_slice(bytes);
        v
    }

    /// Every listed magic is found where it belongs and named; zeros,
    /// the same bytes one byte off and a short head hold nothing.
    /// (Fails with `find` returning None, or with an offset mistyped.)
    #[test]
    fn each_signature_is_found_at_its_offset_only() {
        assert_eq!(find(&vec![0u8; HEAD]), None);
        assert_eq!(find(&[]), None);
        for m in MAGICS {
            assert_eq!(find(&with(m.offset, m.bytes)), Some(m.name), "{}", m.name);
            let off = find(&with(m.offset + 1, m.bytes));
            assert_ne!(off, Some(m.name), "{} one byte off", m.name);
        }
        assert_eq!(find(&with(4086, b"SWAPSPACE2")), Some("a swap area"));
        assert_eq!(find(&with(65526, b"SWAP-SPACE")), Some("a swap area"));
        assert_eq!(find(&with(0, b"XFSB")[..100]), Some("an XFS filesystem"));
        assert_eq!(find(&with(1080, &[0x53, 0xef])[..1081]), None);
    }

    /// An MBR needs a plausible entry beside its 0x55AA: the boot
    /// signature alone (two bytes random data may hold) is not one.
    #[test]
    fn an_mbr_needs_a_partition_entry() {
        let mut v = with(510, &[0x55, 0xaa]);
        assert_eq!(find(&v), None);
        v[446 + 4] = 0x83; // Linux
        v[446 + 12] = 0x00;
        v[446 + 13] = 0x08; // 2048 sectors
        assert_eq!(find(&v), Some("an MBR partition table"));
        v[446] = 0x12; // not a boot flag
        assert_eq!(find(&v), None);
    }

    /// A real ext4 image made by mkfs.ext4 is refused and named; the same
    /// file zeroed is accepted (skipped where mkfs.ext4 is missing).
    #[test]
    fn an_ext4_image_is_refused() {
        let dir = std::env::temp_dir().join(format!("bfq-sig-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let img = dir.join("ext4.img");
        std::fs::write(&img, vec![0u8; 8 << 20]).unwrap();
        assert!(check_none(&img).is_ok());
        let made = std::process::Command::new("mkfs.ext4")
            .args(["-q", "-F"])
            .arg(&img)
            .status();
        if !made.is_ok_and(|s| s.success()) {
            eprintln!("SKIPPED an_ext4_image_is_refused: mkfs.ext4 not available");
            std::fs::remove_dir_all(&dir).unwrap();
            return;
        }
        let e = check_none(&img).unwrap_err().to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            e.contains("ext2/3/4") && e.contains("--force-overwrite"),
            "{e}"
        );
    }
}
