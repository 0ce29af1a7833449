//! Connection setup through the user library only, as MPI runtimes do it: a listening
//! (wildcard) datagram and a bound one swap SMSG mailbox attributes, the listener binds to
//! the peer the exchange names, both start SMSG and talk. Plus the CDM checks (ptag/cookie,
//! attaching twice) and datagram probes and cancel.

mod gni_common;

use std::sync::Arc;

use gni_common::*;
use platform::EngineKind;
use userlib::gni::smsg::{attr_from_bytes, attr_to_bytes, mailbox_attr};
use userlib::gni::{Cdm, CdmMode, PostState, ReturnCode, ep};

#[test]
fn wildcard_and_bound_datagrams_set_up_an_smsg_connection() {
    let c = cluster(EngineKind::Deterministic { seed: 31 });
    let server = side(&c, 1, 500);
    let client = side(&c, 0, 42);
    let sattr = mailbox_attr(server.buf.va(), 0, server.mh, 8, 128).unwrap();
    let cattr = mailbox_attr(client.buf.va(), 0, client.mh, 8, 128).unwrap();

    // The server listens: an unbound endpoint, a datagram with an id.
    let listen = server.nic.ep_create(Some(&server.tx)).unwrap();
    listen
        .post_data_w_id(0x77, &attr_to_bytes(&sattr), 128)
        .unwrap();
    assert_eq!(
        server.nic.post_data_probe_by_id().unwrap_err().rc(),
        ReturnCode::NoMatch
    );
    assert!(listen.post_data_test().unwrap().is_none(), "NOT_DONE");

    // The client knows the server's address and instance: a bound datagram.
    let to_server = client.nic.ep_create(Some(&client.tx)).unwrap();
    to_server.bind(server.pe, server.inst).unwrap();
    to_server.post_data(&attr_to_bytes(&cattr), 128).unwrap();
    let got = to_server.post_data_wait(T).unwrap();
    assert!(ep::completed(&got));
    assert_eq!(ep::datagram_rc(&got), ReturnCode::Success);
    assert_eq!((got.remote_addr, got.remote_id), (server.pe, 500));
    let their = attr_from_bytes(&got.data).unwrap();
    assert_eq!(their, sattr);

    // The server learns who connected, and binds to it.
    assert_eq!(server.nic.post_data_probe_by_id().unwrap(), 0x77);
    let heard = server.nic.post_data_wait_by_id(0x77, T).unwrap();
    assert_eq!(heard.state, PostState::Completed);
    assert_eq!(heard.id, Some(0x77));
    assert_eq!((heard.remote_addr, heard.remote_id), (client.pe, 42));
    let theirs = attr_from_bytes(&heard.data).unwrap();
    assert_eq!(theirs, cattr);
    listen.bind(heard.remote_addr, heard.remote_id).unwrap();

    listen.smsg_init(&sattr, &theirs).unwrap();
    to_server.smsg_init(&cattr, &their).unwrap();
    to_server
        .smsg_send_w_tag(b"hello", b"server", 1, 3)
        .unwrap();
    let m = server
        .nic
        .poll_until(T, || listen.smsg_get_next_w_tag(3))
        .unwrap();
    assert_eq!((m.header(), m.data()), (&b"hello"[..], &b"server"[..]));
    listen.smsg_release().unwrap();
    listen.smsg_send(b"welcome", b"", 2).unwrap();
    let r = client
        .nic
        .poll_until(T, || to_server.smsg_get_next())
        .unwrap();
    assert_eq!(r.header(), b"welcome");
    to_server.smsg_release().unwrap();
}

#[test]
fn cancelled_datagrams_and_datagram_limits() {
    let c = cluster(EngineKind::Deterministic { seed: 32 });
    let a = side(&c, 0, 1);
    let e = a.nic.ep_create(None).unwrap();
    assert_eq!(
        e.post_data(b"x", 8).unwrap_err().rc(),
        ReturnCode::InvalidParam,
        "an unbound endpoint needs an id"
    );
    assert_eq!(
        e.post_data_w_id(u64::MAX, b"x", 8).unwrap_err().rc(),
        ReturnCode::InvalidParam
    );
    assert_eq!(
        e.post_data_w_id(1, &[0; 129], 8).unwrap_err().rc(),
        ReturnCode::InvalidParam
    );
    e.post_data_w_id(5, b"listen", 16).unwrap();
    assert_eq!(
        e.post_data_w_id(6, b"again", 16).unwrap_err().rc(),
        ReturnCode::ErrorResource,
        "one outstanding datagram per endpoint"
    );
    let r = a.nic.post_data_cancel_by_id(5).unwrap();
    assert_eq!(r.state, PostState::Terminated);
    assert_eq!(ep::datagram_rc(&r), ReturnCode::TransactionError);
    // Free again.
    e.post_data_w_id(6, b"again", 16).unwrap();
    assert!(e.post_data_cancel().is_ok());
}

#[test]
fn cdm_checks_ptag_cookie_and_double_attach() {
    let c = cluster(EngineKind::Deterministic { seed: 33 });
    let job = c.job().clone();
    let client = Arc::new(c.node(0).unwrap().open());
    let wrong = Cdm::create(&client, 1, job.ptag, job.cookie ^ 0x10000, CdmMode::empty()).unwrap();
    assert_eq!(
        wrong.attach(-1).unwrap_err().rc(),
        ReturnCode::PermissionError
    );
    assert_eq!(
        Cdm::create(&client, 1, 0, job.cookie, CdmMode::empty())
            .unwrap_err()
            .rc(),
        ReturnCode::InvalidParam
    );
    assert_eq!(
        Cdm::create(&client, 1, 254, job.cookie, CdmMode::empty())
            .unwrap_err()
            .rc(),
        ReturnCode::PermissionError,
        "reserved ptags need privilege"
    );
    assert_eq!(
        Cdm::create(
            &client,
            1,
            job.ptag,
            job.cookie,
            CdmMode::FMA_SHARED | CdmMode::FMA_DEDICATED
        )
        .unwrap_err()
        .rc(),
        ReturnCode::InvalidParam
    );
    let good = Cdm::create(&client, 2, job.ptag, job.cookie, CdmMode::empty()).unwrap();
    let nic = good.attach(-1).unwrap();
    assert_eq!(nic.address(), 0);
    assert_eq!(nic.inst_id(), 2);
    assert_eq!(
        good.attach(-1).unwrap_err().rc(),
        ReturnCode::InvalidState,
        "attaching twice"
    );
    assert_eq!(
        Cdm::create(&client, 3, job.ptag, job.cookie, CdmMode::empty())
            .unwrap()
            .attach(7)
            .unwrap_err()
            .rc(),
        ReturnCode::InvalidParam,
        "no device 7"
    );
    // Registration errors come back as real codes too.
    assert_eq!(
        nic.mem_register(0x10, 0, None, userlib::gni::MemFlags::READWRITE)
            .unwrap_err()
            .rc(),
        ReturnCode::InvalidParam
    );
    let buf = nic.space().alloc(8192).unwrap();
    let mh = nic
        .mem_register(
            buf.va() + 100,
            5000,
            None,
            userlib::gni::MemFlags::READ_ONLY,
        )
        .unwrap();
    let info = userlib::gni::mem::handle_info(&mh).unwrap();
    assert_eq!(info.va, buf.va());
    nic.mem_deregister(&mh).unwrap();
    assert!(nic.mem_deregister(&mh).is_err());
}
