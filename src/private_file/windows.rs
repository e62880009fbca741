//! Private files on Windows: owned by this user's SID (or by SYSTEM or
//! the Administrators, who could write it anyway), with no access rule
//! that lets anyone else write; made with an access list that admits
//! this user alone (SDDL `D:P(A;;FA;;;<SID>)`: protected, so nothing is
//! inherited from the folder). Opens that must not follow a link open the
//! link itself (FILE_FLAG_OPEN_REPARSE_POINT) and refuse it.

use std::ffi::c_void;
use std::fs::{File, OpenOptions};
use std::os::windows::ffi::OsStrExt;
use std::os::windows::fs::OpenOptionsExt;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::path::Path;

use windows_sys::Win32::Foundation::{
    CloseHandle, LocalFree, ERROR_SUCCESS, GENERIC_READ, GENERIC_WRITE, HANDLE, INVALID_HANDLE_VALUE, PSID,
};
use windows_sys::Win32::Security::Authorization::{
    ConvertSidToStringSidW, ConvertStringSecurityDescriptorToSecurityDescriptorW, GetSecurityInfo, SetSecurityInfo,
    SDDL_REVISION_1, SE_FILE_OBJECT,
};
use windows_sys::Win32::Security::{
    AclSizeInformation, GetAce, GetAclInformation, GetSecurityDescriptorDacl, GetTokenInformation, TokenUser,
    ACCESS_ALLOWED_ACE, ACE_HEADER, ACL, ACL_SIZE_INFORMATION, DACL_SECURITY_INFORMATION, OWNER_SECURITY_INFORMATION,
    PROTECTED_DACL_SECURITY_INFORMATION, PSECURITY_DESCRIPTOR, SECURITY_ATTRIBUTES, TOKEN_QUERY, TOKEN_USER,
};
use windows_sys::Win32::Storage::FileSystem::{
    CreateFileW, CREATE_NEW, FILE_APPEND_DATA, FILE_FLAG_OPEN_REPARSE_POINT, FILE_READ_ATTRIBUTES, FILE_SHARE_DELETE,
    FILE_SHARE_READ, FILE_SHARE_WRITE, OPEN_ALWAYS, READ_CONTROL, SYNCHRONIZE, WRITE_DAC,
};
use windows_sys::Win32::System::Threading::{GetCurrentProcess, OpenProcessToken};

use super::Untrusted;

/// What lets a rule's holder change a file's contents or its rules.
const WRITE_RIGHTS: u32 = 0x0002 | 0x0004 | 0x0004_0000 | 0x0008_0000 | 0x4000_0000 | 0x1000_0000;

/// Besides this user: SYSTEM, the Administrators, and OWNER RIGHTS
/// (whatever the owner, this user, may do).
const TRUSTED_SIDS: [&str; 3] = ["S-1-5-18", "S-1-5-32-544", "S-1-3-4"];

const LINK_REFUSED: &str = "it is a symbolic link or junction";

/// This process's user, as a SID string.
fn my_sid() -> std::io::Result<String> {
    let mut token: HANDLE = 0;
    // SAFETY: opens our own process's token for reading; closed below.
    if unsafe { OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &mut token) } == 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut buf = vec![0u64; 64];
    let mut len = 0u32;
    // SAFETY: an aligned buffer of the size given; the SID it holds is
    // read before the buffer goes.
    let sid = unsafe {
        let ok = GetTokenInformation(token, TokenUser, buf.as_mut_ptr().cast(), (buf.len() * 8) as u32, &mut len);
        CloseHandle(token);
        if ok == 0 {
            return Err(std::io::Error::last_os_error());
        }
        sid_string((*(buf.as_ptr() as *const TOKEN_USER)).User.Sid)
    };
    sid.ok_or_else(|| std::io::Error::other("this user's SID could not be read"))
}

/// # Safety
/// `sid` must point to a valid SID.
unsafe fn sid_string(sid: PSID) -> Option<String> {
    let mut text: *mut u16 = std::ptr::null_mut();
    if ConvertSidToStringSidW(sid, &mut text) == 0 {
        return None;
    }
    let len = (0..).take_while(|&i| *text.add(i) != 0).count();
    let s = String::from_utf16_lossy(std::slice::from_raw_parts(text, len));
    LocalFree(text as _);
    Some(s)
}

/// The owner's SID and the access list's rules that let someone write,
/// as SID strings.
fn owner_and_writers(file: &File) -> std::io::Result<(String, Option<Vec<String>>)> {
    let (mut owner, mut dacl, mut sd): (PSID, *mut ACL, PSECURITY_DESCRIPTOR) =
        (std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: reads the security of our open handle; `sd` owns what the
    // pointers point into and is freed at the end.
    unsafe {
        let rc = GetSecurityInfo(
            file.as_raw_handle() as HANDLE,
            SE_FILE_OBJECT,
            OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION,
            &mut owner,
            std::ptr::null_mut(),
            &mut dacl,
            std::ptr::null_mut(),
            &mut sd,
        );
        if rc != ERROR_SUCCESS {
            return Err(std::io::Error::from_raw_os_error(rc as i32));
        }
        let owner_sid = sid_string(owner).unwrap_or_default();
        let writers = (!dacl.is_null()).then(|| writers(dacl));
        LocalFree(sd as _);
        Ok((owner_sid, writers))
    }
}

/// # Safety
/// `dacl` must point to a valid access list.
unsafe fn writers(dacl: *mut ACL) -> Vec<String> {
    let mut size: ACL_SIZE_INFORMATION = std::mem::zeroed();
    let info_len = std::mem::size_of::<ACL_SIZE_INFORMATION>() as u32;
    if GetAclInformation(dacl, (&mut size as *mut ACL_SIZE_INFORMATION).cast(), info_len, AclSizeInformation) == 0 {
        return vec!["an unreadable access list".into()];
    }
    let mut found = Vec::new();
    for i in 0..size.AceCount {
        let mut ace: *mut c_void = std::ptr::null_mut();
        if GetAce(dacl, i, &mut ace) == 0 {
            continue;
        }
        // Only "allow" rules grant; type 0 is ACCESS_ALLOWED_ACE_TYPE.
        if (*(ace as *const ACE_HEADER)).AceType != 0 {
            continue;
        }
        let allowed = ace as *const ACCESS_ALLOWED_ACE;
        if (*allowed).Mask & WRITE_RIGHTS != 0 {
            let sid = std::ptr::addr_of!((*allowed).SidStart) as PSID;
            found.push(sid_string(sid).unwrap_or_else(|| "an unknown SID".into()));
        }
    }
    found
}

pub(super) fn check_owner_and_writers(file: &File) -> Result<(), Untrusted> {
    let me = my_sid().map_err(|e| Untrusted::OwnedByAnother(format!("unknown: {e}")))?;
    let (owner, writers) = owner_and_writers(file).map_err(|e| Untrusted::OwnedByAnother(format!("unknown: {e}")))?;
    if owner != me && !TRUSTED_SIDS.contains(&owner.as_str()) {
        return Err(Untrusted::OwnedByAnother(format!("SID {owner}")));
    }
    let Some(writers) = writers else {
        return Err(Untrusted::WritableByOthers("it has no access list, so everyone can".into()));
    };
    match writers.into_iter().find(|w| *w != me && !TRUSTED_SIDS.contains(&w.as_str())) {
        Some(other) => Err(Untrusted::WritableByOthers(format!("an access rule lets {other} write it"))),
        None => Ok(()),
    }
}

/// Who owns `file` when it is not this user ("SID S-1-5-...").
pub fn other_owner(file: &File) -> Option<String> {
    let me = my_sid().ok()?;
    let (owner, _) = owner_and_writers(file).ok()?;
    (owner != me && !TRUSTED_SIDS.contains(&owner.as_str())).then(|| format!("SID {owner}"))
}

/// What to do so that only its owner can write `path`.
pub fn writable_fix(path: &str) -> String {
    format!("run icacls \"{path}\" /inheritance:r /grant:r \"%USERNAME%:F\"")
}

pub fn open_to_read(path: &Path, follow_links: bool) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    if !follow_links {
        options.custom_flags(FILE_FLAG_OPEN_REPARSE_POINT);
    }
    refuse_link(options.open(path)?, follow_links)
}

fn refuse_link(file: File, follow_links: bool) -> std::io::Result<File> {
    if !follow_links && file.metadata()?.file_type().is_symlink() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, LINK_REFUSED));
    }
    Ok(file)
}

pub fn is_link_refused(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::InvalidInput && e.to_string() == LINK_REFUSED
}

/// A security descriptor that admits this user alone, freed on drop.
struct PrivateDescriptor(PSECURITY_DESCRIPTOR);

impl PrivateDescriptor {
    fn new() -> std::io::Result<PrivateDescriptor> {
        let sddl: Vec<u16> = format!("D:P(A;;FA;;;{})", my_sid()?).encode_utf16().chain(Some(0)).collect();
        let mut sd: PSECURITY_DESCRIPTOR = std::ptr::null_mut();
        // SAFETY: a NUL-terminated string; the descriptor written is ours
        // to free (Drop).
        let ok = unsafe {
            ConvertStringSecurityDescriptorToSecurityDescriptorW(
                sddl.as_ptr(),
                SDDL_REVISION_1,
                &mut sd,
                std::ptr::null_mut(),
            )
        };
        if ok == 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(PrivateDescriptor(sd))
    }
}

impl Drop for PrivateDescriptor {
    fn drop(&mut self) {
        // SAFETY: the descriptor `new` was given, freed once.
        unsafe { LocalFree(self.0 as _) };
    }
}

/// A file opened (made private if new) with `access`, never through a link.
fn create_private(path: &Path, access: u32, disposition: u32) -> std::io::Result<File> {
    let sd = PrivateDescriptor::new()?;
    let wide: Vec<u16> = path.as_os_str().encode_wide().chain(Some(0)).collect();
    let attributes = SECURITY_ATTRIBUTES {
        nLength: std::mem::size_of::<SECURITY_ATTRIBUTES>() as u32,
        lpSecurityDescriptor: sd.0,
        bInheritHandle: 0,
    };
    // SAFETY: a NUL-terminated path and a descriptor that lives past the
    // call (CreateFileW copies it).
    let handle = unsafe {
        CreateFileW(
            wide.as_ptr(),
            access,
            FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
            &attributes,
            disposition,
            FILE_FLAG_OPEN_REPARSE_POINT,
            0,
        )
    };
    if handle == INVALID_HANDLE_VALUE {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a handle just returned, owned by nobody else.
    let file = File::from(unsafe { OwnedHandle::from_raw_handle(handle as _) });
    refuse_link(file, false)
}

pub fn open_for_append(path: &Path) -> std::io::Result<File> {
    let access = FILE_APPEND_DATA | FILE_READ_ATTRIBUTES | READ_CONTROL | WRITE_DAC | SYNCHRONIZE;
    create_private(path, access, OPEN_ALWAYS)
}

/// Narrows a file made before (by hand, or by an older version) to this
/// user alone. Needs the handle opened with WRITE_DAC (`open_for_append`).
pub fn make_private(file: &File) -> std::io::Result<()> {
    if check_owner_and_writers(file).is_ok() {
        return Ok(());
    }
    let sd = PrivateDescriptor::new()?;
    // SAFETY: the access list is read out of our live descriptor and set
    // on our handle.
    unsafe {
        let (mut present, mut dacl, mut defaulted) = (0, std::ptr::null_mut(), 0);
        GetSecurityDescriptorDacl(sd.0, &mut present, &mut dacl, &mut defaulted);
        let rc = SetSecurityInfo(
            file.as_raw_handle() as HANDLE,
            SE_FILE_OBJECT,
            DACL_SECURITY_INFORMATION | PROTECTED_DACL_SECURITY_INFORMATION,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            dacl,
            std::ptr::null(),
        );
        if rc != ERROR_SUCCESS {
            return Err(std::io::Error::from_raw_os_error(rc as i32));
        }
    }
    Ok(())
}

/// Under %LOCALAPPDATA%, which is this user's alone already.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

pub(super) fn open_lock_file(path: &Path) -> std::io::Result<File> {
    create_private(path, GENERIC_READ | SYNCHRONIZE, OPEN_ALWAYS)
}

pub(super) fn create_new_private(path: &Path) -> std::io::Result<File> {
    create_private(path, GENERIC_WRITE | READ_CONTROL | SYNCHRONIZE, CREATE_NEW)
}
