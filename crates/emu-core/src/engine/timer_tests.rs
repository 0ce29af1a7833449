//! On the threaded engine a due timer waits for packets that are already on their way: a
//! request timeout must not fire because the host thread that delivers the response has not
//! been scheduled yet (the emulator's slowness is not a hardware error).

use super::threaded::{Threaded, ThreadedConfig};
use super::{DeviceId, DeviceIo, DeviceModel, Progress};
use crate::dma::DmaPort;
use crate::fabric::{Fabric, FabricConfig, Packet, PortId, Topology, TrafficClass};
use crate::memory::HostMemory;
use crate::mmio::MmioError;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};

/// What the requester saw, in order.
type Log = Arc<Mutex<Vec<&'static str>>>;

/// A door the responder waits at until the test opens it.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    cond: Condvar,
}

/// Port 0 sends a request to port 1 on every store and arms a timer due at once (its
/// request timeout); it logs the response and the timer. Port 1 answers each request, after
/// waiting at the gate (a host thread descheduled while it runs the delivery).
enum Dev {
    Requester(Log),
    Responder(Arc<Gate>, mpsc::Sender<()>),
}

impl DeviceModel for Dev {
    fn name(&self) -> &str {
        "timer-test"
    }
    fn config_read(&mut self, _reg: u16) -> u32 {
        0
    }
    fn config_write(&mut self, _reg: u16, _value: u32) {}
    fn mmio_read(
        &mut self,
        _io: &mut DeviceIo<'_>,
        _bar: u8,
        _offset: u64,
        data: &mut [u8],
    ) -> Result<(), MmioError> {
        data.fill(0);
        Ok(())
    }
    fn mmio_write(
        &mut self,
        io: &mut DeviceIo<'_>,
        _bar: u8,
        _offset: u64,
        _data: &[u8],
    ) -> Result<(), MmioError> {
        io.send(Packet::new(PortId(0), PortId(1), TrafficClass(0), vec![1]));
        io.timer(super::SimDuration(0), 7);
        Ok(())
    }
    fn packet(&mut self, io: &mut DeviceIo<'_>, _pkt: Packet) {
        match self {
            Dev::Requester(log) => log.lock().unwrap().push("response"),
            Dev::Responder(gate, entered) => {
                let _ = entered.send(());
                let mut open = gate.open.lock().unwrap();
                while !*open {
                    open = gate.cond.wait(open).unwrap();
                }
                io.send(Packet::new(PortId(1), PortId(0), TrafficClass(0), vec![2]));
            }
        }
    }
    fn timer(&mut self, _io: &mut DeviceIo<'_>, _token: u64) {
        if let Dev::Requester(log) = self {
            log.lock().unwrap().push("timer");
        }
    }
    fn bar_size(&self, bar: u8) -> u64 {
        if bar == 0 { 64 } else { 0 }
    }
}

#[test]
fn a_due_timer_waits_for_the_response_in_flight() {
    let fabric = Fabric::new(FabricConfig::new(Topology::PointToPoint)).unwrap();
    // No engine threads and nothing inline: every delivery is deferred work that only
    // progress calls run, so the interleaving below is exact.
    let e = Arc::new(
        Threaded::new(
            fabric,
            ThreadedConfig {
                workers: 0,
                inline_budget: 0,
                ..ThreadedConfig::default()
            },
        )
        .unwrap(),
    );
    let log = Log::default();
    let gate = Arc::new(Gate::default());
    let (entered_tx, entered) = mpsc::channel();
    let dma = DmaPort::passthrough(HostMemory::new(2 * 4096).unwrap());
    e.add_device(
        Box::new(Dev::Requester(log.clone())),
        dma.clone(),
        Some(PortId(0)),
    )
    .unwrap();
    e.add_device(
        Box::new(Dev::Responder(gate.clone(), entered_tx)),
        dma,
        Some(PortId(1)),
    )
    .unwrap();

    // The request is queued and the timeout is due.
    e.mmio_write(DeviceId(0), 0, 0, &[1]).unwrap();
    // Another host thread takes the request and is held while it runs the responder.
    let runner = {
        let e = e.clone();
        std::thread::spawn(move || Progress::progress(&*e))
    };
    entered.recv().unwrap();
    // The timer is due, but the response is on its way: this thread's progress calls must
    // leave the timer alone.
    for _ in 0..100 {
        Progress::progress(&*e);
    }
    assert!(
        log.lock().unwrap().is_empty(),
        "timer ran before the response: {:?}",
        log.lock().unwrap()
    );

    // The delivering thread runs again; the response arrives, then the timer runs.
    *gate.open.lock().unwrap() = true;
    gate.cond.notify_all();
    assert!(runner.join().unwrap());
    for _ in 0..100 {
        if log.lock().unwrap().len() == 2 {
            break;
        }
        Progress::progress(&*e);
    }
    assert_eq!(*log.lock().unwrap(), ["response", "timer"]);
}
