//! The library's state between MPI calls (one rank per process, owned by the thread that
//! called `MPI_Init`): the world, and the objects the program holds handles to. Handles of
//! objects the program creates are numbers from [`FIRST_HANDLE`] up, distinct across every
//! kind, so a handle of the wrong kind is found in no table and reported with the right
//! class; predefined objects have the fixed values of the standard ABI.

#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::ffi::c_int;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::rc::Rc;
use std::sync::atomic::{AtomicU8, Ordering};

use mpi::SimpleCommunicator;
use mpi::topology::Group;
use mpi::typemap::Layout;

use crate::consts::*;
use crate::error::{AResult, AbiError, class_text};
use crate::ffi::callbacks::{UserErrhandler, UserOp};
use crate::ffi::mem::OwnedMem;
use crate::init::World;
use crate::requests::Req;
use crate::rma::WinObj;
use crate::types;

/// The first handle value given to an object the program creates.
pub const FIRST_HANDLE: Handle = 0x1_0000;

/// Where MPI is in its life: not yet initialized, initialized, finalized.
static PHASE: AtomicU8 = AtomicU8::new(0);
/// [`PHASE`] values.
pub const NOT_INITIALIZED: u8 = 0;
pub const INITIALIZED: u8 = 1;
pub const FINALIZED: u8 = 2;

/// The current phase.
pub fn phase() -> u8 {
    PHASE.load(Ordering::Acquire)
}

pub(crate) fn set_phase(p: u8) {
    PHASE.store(p, Ordering::Release);
}

/// A communicator the program holds.
pub(crate) struct CommObj {
    pub comm: SimpleCommunicator,
    pub errh: Handle,
    pub name: String,
    pub attrs: HashMap<c_int, usize>,
    /// A copy that lives as long as the library, for matched-probe messages, which borrow
    /// their communicator (made on the first `MPI_Mprobe` on this communicator).
    pub forever: Option<&'static SimpleCommunicator>,
}

impl CommObj {
    pub fn new(comm: SimpleCommunicator, errh: Handle, name: &str) -> Self {
        CommObj {
            comm,
            errh,
            name: name.to_string(),
            attrs: HashMap::new(),
            forever: None,
        }
    }
}

/// A datatype.
pub(crate) struct TypeObj {
    pub layout: Rc<Layout>,
    pub committed: bool,
    pub predefined: bool,
    pub name: String,
}

/// An operation created with `MPI_Op_create`.
pub(crate) struct OpObj {
    pub user: UserOp,
}

/// An error handler created by the program.
pub(crate) enum ErrhObj {
    User(UserErrhandler),
}

/// An attribute key made by the program.
pub(crate) struct Keyval {
    /// `MPI_COMM_DUP_FN`: copy the value to duplicates.
    pub copy_on_dup: bool,
}

/// A matched message (`MPI_Message`).
pub(crate) struct MsgObj {
    pub msg: mpi::Message<'static>,
}

/// Everything MPI holds for the program.
pub(crate) struct State {
    pub world: World,
    pub comms: HashMap<Handle, CommObj>,
    pub groups: HashMap<Handle, Group>,
    pub types: HashMap<Handle, TypeObj>,
    pub reqs: HashMap<Handle, Req>,
    pub ops: HashMap<Handle, OpObj>,
    pub wins: HashMap<Handle, WinObj>,
    pub infos: HashMap<Handle, BTreeMap<String, String>>,
    pub errhs: HashMap<Handle, ErrhObj>,
    pub keyvals: HashMap<c_int, Keyval>,
    pub msgs: HashMap<Handle, MsgObj>,
    /// Memory of `MPI_Alloc_mem`, by address.
    pub allocs: HashMap<usize, OwnedMem>,
    /// The buffer of `MPI_Buffer_attach`: address and size.
    pub bsend: Option<(usize, usize)>,
    pub thread_level: c_int,
    next_handle: Handle,
    next_keyval: c_int,
}

// The state, and the last message of each error class returned to the program
// (`MPI_Error_string`).
thread_local! {
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
    static LAST: RefCell<HashMap<c_int, String>> = RefCell::new(HashMap::new());
}

impl State {
    /// The state of a freshly initialized world.
    pub fn new(world: World, thread_level: c_int) -> Self {
        let wc = world.universe.world();
        let selfc = wc
            .split_by_color_with_key(Some(wc.rank()), 0)
            .ok()
            .flatten();
        let mut s = State {
            comms: HashMap::new(),
            groups: HashMap::new(),
            types: HashMap::new(),
            reqs: HashMap::new(),
            ops: HashMap::new(),
            wins: HashMap::new(),
            infos: HashMap::new(),
            errhs: HashMap::new(),
            keyvals: HashMap::new(),
            msgs: HashMap::new(),
            allocs: HashMap::new(),
            bsend: None,
            thread_level,
            next_handle: FIRST_HANDLE,
            next_keyval: 1000,
            world,
        };
        let empty = wc.group().exclude(&(0..wc.size()).collect::<Vec<_>>());
        if let Ok(g) = empty {
            s.groups.insert(MPI_GROUP_EMPTY, g);
        }
        if let Some(c) = selfc {
            s.comms.insert(
                MPI_COMM_SELF,
                CommObj::new(c, MPI_ERRORS_ARE_FATAL, "MPI_COMM_SELF"),
            );
        }
        s.comms.insert(
            MPI_COMM_WORLD,
            CommObj::new(wc, MPI_ERRORS_ARE_FATAL, "MPI_COMM_WORLD"),
        );
        for (h, name, layout) in types::predefined() {
            s.types.insert(
                h,
                TypeObj {
                    layout: Rc::new(layout),
                    committed: true,
                    predefined: true,
                    name: name.to_string(),
                },
            );
        }
        s
    }

    /// `MPI_Finalize`: drop the program's objects, then finalize the world.
    pub fn finalize(mut self) -> AResult<()> {
        self.reqs.clear();
        self.msgs.clear();
        self.wins.clear();
        self.comms.clear();
        self.groups.clear();
        let State { world, .. } = self;
        world.finalize()
    }

    /// Register request `r`: its handle.
    pub fn new_req(&mut self, r: Req) -> Handle {
        let h = self.handle();
        self.reqs.insert(h, r);
        h
    }

    /// A fresh handle value.
    pub fn handle(&mut self) -> Handle {
        self.next_handle += 16;
        self.next_handle
    }

    /// A fresh attribute key.
    pub fn keyval(&mut self) -> c_int {
        self.next_keyval += 1;
        self.next_keyval
    }

    /// The communicator of handle `h`.
    pub fn comm(&self, h: Handle) -> AResult<&CommObj> {
        self.comms.get(&h).ok_or_else(|| bad_comm(h))
    }

    /// The communicator of handle `h`, writable.
    pub fn comm_mut(&mut self, h: Handle) -> AResult<&mut CommObj> {
        self.comms.get_mut(&h).ok_or_else(|| bad_comm(h))
    }

    /// The layout of datatype `h` (committed, or predefined).
    pub fn layout(&self, h: Handle) -> AResult<Rc<Layout>> {
        match self.types.get(&h) {
            Some(t) if t.committed => Ok(Rc::clone(&t.layout)),
            Some(_) => Err(AbiError::new(
                MPI_ERR_TYPE,
                format!("datatype {h:#x} is not committed (MPI_Type_commit)"),
            )),
            None => Err(bad_type(h)),
        }
    }

    /// The layout of datatype `h`, committed or not (for type constructors and queries).
    pub fn any_layout(&self, h: Handle) -> AResult<Rc<Layout>> {
        self.types
            .get(&h)
            .map(|t| Rc::clone(&t.layout))
            .ok_or_else(|| bad_type(h))
    }

    /// The group of handle `h`.
    pub fn group(&self, h: Handle) -> AResult<&Group> {
        self.groups
            .get(&h)
            .ok_or_else(|| AbiError::new(MPI_ERR_GROUP, format!("{h:#x} is not a group handle")))
    }

    /// Register a new datatype.
    pub fn new_type(&mut self, layout: Layout) -> Handle {
        let h = self.handle();
        self.types.insert(
            h,
            TypeObj {
                layout: Rc::new(layout),
                committed: false,
                predefined: false,
                name: String::new(),
            },
        );
        h
    }
}

pub(crate) fn bad_comm(h: Handle) -> AbiError {
    if h == MPI_COMM_NULL {
        AbiError::new(
            MPI_ERR_COMM,
            "MPI_COMM_NULL is not a valid communicator here",
        )
    } else {
        AbiError::new(MPI_ERR_COMM, format!("{h:#x} is not a communicator handle"))
    }
}

pub(crate) fn bad_type(h: Handle) -> AbiError {
    if h == MPI_DATATYPE_NULL {
        AbiError::new(
            MPI_ERR_TYPE,
            "MPI_DATATYPE_NULL is not a valid datatype here",
        )
    } else {
        AbiError::new(
            MPI_ERR_TYPE,
            format!("{h:#x} is not a datatype handle this library knows"),
        )
    }
}

/// Install the state (`MPI_Init`).
pub(crate) fn install(s: State) {
    STATE.with(|c| *c.borrow_mut() = Some(s));
}

/// Take the state out (`MPI_Finalize`).
pub(crate) fn take() -> Option<State> {
    STATE.with(|c| c.try_borrow_mut().ok().and_then(|mut g| g.take()))
}

/// Which object's error handler an error goes to.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Eh {
    /// A communicator's (the world's when the handle is bad).
    Comm(Handle),
    /// A window's.
    Win(Handle),
    /// None in particular: `MPI_COMM_SELF`'s.
    Other,
}

/// What to do with an error.
enum Action {
    Return,
    Fatal,
    User(UserErrhandler, Handle),
}

fn action(s: &State, eh: Eh) -> Action {
    let (errh, handle) = match eh {
        Eh::Comm(h) => match s.comms.get(&h) {
            Some(c) => (c.errh, h),
            None => (
                s.comms
                    .get(&MPI_COMM_WORLD)
                    .map_or(MPI_ERRORS_ARE_FATAL, |c| c.errh),
                MPI_COMM_WORLD,
            ),
        },
        Eh::Win(h) => match s.wins.get(&h) {
            Some(w) => (w.errh, h),
            None => (
                s.comms
                    .get(&MPI_COMM_WORLD)
                    .map_or(MPI_ERRORS_ARE_FATAL, |c| c.errh),
                MPI_COMM_WORLD,
            ),
        },
        Eh::Other => (
            s.comms
                .get(&MPI_COMM_SELF)
                .map_or(MPI_ERRORS_ARE_FATAL, |c| c.errh),
            MPI_COMM_SELF,
        ),
    };
    match errh {
        MPI_ERRORS_RETURN => Action::Return,
        MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT => Action::Fatal,
        h => match s.errhs.get(&h) {
            Some(ErrhObj::User(u)) => Action::User(*u, handle),
            None => Action::Fatal,
        },
    }
}

/// Remember `e`'s message for `MPI_Error_string`.
pub(crate) fn remember(e: &AbiError) {
    LAST.with(|l| {
        l.borrow_mut().insert(e.class, e.msg.clone());
    });
}

/// The text of error code `code`: the last message of that class, else the class's text.
pub(crate) fn error_text(code: c_int) -> Option<String> {
    let generic = class_text(code)?;
    Some(
        LAST.with(|l| l.borrow().get(&code).cloned())
            .map_or_else(|| generic.to_string(), |m| format!("{generic}: {m}")),
    )
}

fn not_initialized(name: &str) -> AbiError {
    let why = match phase() {
        FINALIZED => "after MPI_Finalize",
        INITIALIZED => {
            "from a thread other than the one that initialized MPI (this library provides \
             MPI_THREAD_FUNNELED at most)"
        }
        _ => "before MPI_Init",
    };
    AbiError::new(MPI_ERR_OTHER, format!("{name} called {why}"))
}

/// Run MPI call `name` on the state: its result as the code to return, after the error
/// handler of `eh` had its say.
pub(crate) fn call(name: &str, eh: Eh, f: impl FnOnce(&mut State) -> AResult<()>) -> c_int {
    let r = catch_unwind(AssertUnwindSafe(|| {
        STATE.with(|cell| {
            let mut g = cell.try_borrow_mut().map_err(|_| {
                AbiError::new(
                    MPI_ERR_OTHER,
                    format!("{name} called from inside another MPI call (a callback)"),
                )
            })?;
            let s = g.as_mut().ok_or_else(|| not_initialized(name))?;
            f(s)
        })
    }));
    let e = match r {
        Ok(Ok(())) => return MPI_SUCCESS,
        Ok(Err(e)) => e,
        Err(p) => AbiError::new(
            MPI_ERR_INTERN,
            format!(
                "internal error in {name}: {}",
                p.downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_default()
            ),
        ),
    };
    raise(name, eh, e)
}

/// Hand error `e` of call `name` to the error handler of `eh`; the code to return.
pub(crate) fn raise(name: &str, eh: Eh, e: AbiError) -> c_int {
    remember(&e);
    let act = STATE.with(|cell| match cell.try_borrow() {
        Ok(g) => g.as_ref().map_or(Action::Return, |s| action(s, eh)),
        Err(_) => Action::Return,
    });
    match act {
        Action::Return => {
            if phase() != INITIALIZED {
                eprintln!("nicemu MPI: {name}: {}", e.msg);
            }
            e.class
        }
        Action::Fatal => {
            eprintln!(
                "nicemu MPI: fatal error in {name}: {} (error class {}; the error handler is \
                 MPI_ERRORS_ARE_FATAL)",
                e.msg, e.class
            );
            exit_job(
                e.class.clamp(1, 255),
                &format!("fatal error in {name}: {}", e.msg),
            );
        }
        Action::User(u, h) => {
            u.invoke(h, e.class);
            e.class
        }
    }
}

/// End this process and the job it belongs to with exit status `status` (a fatal error,
/// `MPI_Abort`): the process manager is told to end every rank, and this rank's MPI state is
/// left as it is. Exiting runs the destructors of this thread's state, and dropping the MPI
/// environment would finalize, which is collective: the rank would wait for peers that are
/// not coming (a job whose rank failed with a window open hung until its time limit).
pub(crate) fn exit_job(status: c_int, why: &str) -> ! {
    let state = STATE.with(|cell| cell.try_borrow_mut().ok().and_then(|mut g| g.take()));
    if let Some(s) = state {
        s.world.universe.abort(why);
        std::mem::forget(s);
    }
    std::process::exit(status)
}
