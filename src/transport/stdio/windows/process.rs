//! The server's process tree on Windows: started suspended, put in a Job
//! Object of its own, then let run, so every process it starts (npx.cmd's
//! cmd.exe, node, whatever node starts) is in the job before it exists.
//! The job is made with kill-on-close: when its one handle closes (the
//! client's close, the garbage collector, the Lua state's close, or this
//! process ending in any way, a crash included) Windows ends every
//! process in it. Windows has no SIGTERM for a process without a console
//! window of its own, so the spec's sequence here is: stdin closed, a
//! grace period, then the whole job terminated.

use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::os::windows::process::CommandExt;
use std::process::Child;
use std::time::Duration;

use windows_sys::Win32::Foundation::{CloseHandle, HANDLE, INVALID_HANDLE_VALUE, WAIT_OBJECT_0};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, Thread32First, Thread32Next, TH32CS_SNAPTHREAD, THREADENTRY32,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JobObjectExtendedLimitInformation, SetInformationJobObject,
    TerminateJobObject, JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
};
use windows_sys::Win32::System::Threading::{
    GetExitCodeProcess, OpenThread, ResumeThread, WaitForSingleObject, CREATE_NO_WINDOW, CREATE_SUSPENDED,
    THREAD_SUSPEND_RESUME,
};

use super::super::Options;
use super::command::command;

/// The spec's grace between closing stdin and ending the server.
pub(super) const GRACE: Duration = Duration::from_secs(2);

/// The exit code a terminated job's processes get.
const TERMINATED: u32 = 1;

/// A running server: its first process and the job that holds its tree.
pub(super) struct Server {
    pub(super) child: Child,
    job: OwnedHandle,
}

/// Starts the server with the server's ends of its three pipes, in a job of its own. Without
/// a console window: a GUI host (Neovim's) would otherwise flash one up
/// for every server, and a console host's Ctrl-C would reach the server.
pub(super) fn spawn(
    options: &Options,
    stdin: OwnedHandle,
    stdout: OwnedHandle,
    stderr: OwnedHandle,
) -> std::io::Result<Server> {
    let mut command = command(options)?;
    command.stdin(stdin).stdout(stdout).stderr(stderr).creation_flags(CREATE_SUSPENDED | CREATE_NO_WINDOW);
    let job = kill_on_close_job()?;
    let mut child = command.spawn()?;
    let started = assign(&job, &child).and_then(|()| resume(child.id()));
    if let Err(e) = started {
        let _ = child.kill();
        let _ = child.wait();
        return Err(e);
    }
    Ok(Server { child, job })
}

fn kill_on_close_job() -> std::io::Result<OwnedHandle> {
    // SAFETY: a new, unnamed job with default security; the handle is ours.
    let job = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
    if job == 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a handle just returned, owned by nobody else.
    let job = unsafe { OwnedHandle::from_raw_handle(job as _) };
    // SAFETY: a zeroed structure is a valid "no limits" value.
    let mut limits: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
    limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
    // SAFETY: the structure and its size, for the class that takes it.
    let set = unsafe {
        SetInformationJobObject(
            job.as_raw_handle() as HANDLE,
            JobObjectExtendedLimitInformation,
            (&limits as *const JOBOBJECT_EXTENDED_LIMIT_INFORMATION).cast(),
            std::mem::size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
        )
    };
    if set == 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(job)
}

fn assign(job: &OwnedHandle, child: &Child) -> std::io::Result<()> {
    // SAFETY: two live handles of ours.
    if unsafe { AssignProcessToJobObject(job.as_raw_handle() as HANDLE, child.as_raw_handle() as HANDLE) } == 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Lets the suspended process run: its one thread, found by a snapshot
/// of the system's threads (std keeps the thread handle to itself).
fn resume(pid: u32) -> std::io::Result<()> {
    // SAFETY: a snapshot of every thread; closed below.
    let snapshot = unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0) };
    if snapshot == INVALID_HANDLE_VALUE {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a zeroed entry with its size set, as Thread32First wants.
    let mut entry: THREADENTRY32 = unsafe { std::mem::zeroed() };
    entry.dwSize = std::mem::size_of::<THREADENTRY32>() as u32;
    let mut resumed = 0;
    // SAFETY: the snapshot is open and the entry is ours to fill.
    let mut more = unsafe { Thread32First(snapshot, &mut entry) } != 0;
    while more {
        if entry.th32OwnerProcessID == pid {
            // SAFETY: opens the thread for resuming only; closed at once.
            unsafe {
                let thread = OpenThread(THREAD_SUSPEND_RESUME, 0, entry.th32ThreadID);
                if thread != 0 {
                    if ResumeThread(thread) != u32::MAX {
                        resumed += 1;
                    }
                    CloseHandle(thread);
                }
            }
        }
        // SAFETY: as for Thread32First.
        more = unsafe { Thread32Next(snapshot, &mut entry) } != 0;
    }
    // SAFETY: the snapshot's handle, closed once.
    unsafe { CloseHandle(snapshot) };
    if resumed == 0 {
        return Err(std::io::Error::other("the server's process could not be resumed"));
    }
    Ok(())
}

impl Server {
    pub(super) fn handle(&self) -> HANDLE {
        self.child.as_raw_handle() as HANDLE
    }

    /// The exit code once the first process has ended, waiting `within`.
    pub(super) fn exit_code(&self, within: Duration) -> Option<u32> {
        // SAFETY: waits on our live process handle.
        if unsafe { WaitForSingleObject(self.handle(), within.as_millis().min(u32::MAX as u128 - 1) as u32) }
            != WAIT_OBJECT_0
        {
            return None;
        }
        let mut code = 0u32;
        // SAFETY: reads the code into a local.
        (unsafe { GetExitCodeProcess(self.handle(), &mut code) } != 0).then_some(code)
    }

    /// The spec's shutdown on Windows (stdin is closed already): the
    /// grace, then every process of the job ended. The job's handle closes
    /// when `self` drops, which would end them anyway.
    pub(super) fn stop(mut self) {
        if self.exit_code(GRACE).is_none() {
            // SAFETY: terminates the processes of our own job.
            unsafe { TerminateJobObject(self.job.as_raw_handle() as HANDLE, TERMINATED) };
        }
        // The first process too, should the job not hold it; then it
        // is waited for, so its exit code is final.
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Whatever the first process left in the job goes with the job:
        // a grandchild that outlived its wrapper.
        // SAFETY: as above.
        unsafe { TerminateJobObject(self.job.as_raw_handle() as HANDLE, TERMINATED) };
    }
}
