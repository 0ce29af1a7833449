//! `mmap`: a token decoded to the BAR window or host pages it stands for.

use super::super::state::*;
use super::super::*;

impl Kgni {
    pub(super) fn mmap(
        &self,
        st: &mut State,
        client: ClientId,
        token: MmapToken,
    ) -> Result<Response, KgniError> {
        let (kind, index) = token.decode().ok_or(KgniError::NoSuchHandle {
            kind: Object::MmapToken,
            handle: token.0,
        })?;
        let bar = Arc::clone(self.hw.bar());
        let window = |base: u64, size: u64, shared: &Arc<MapShared>| {
            Response::Mapping(Mapping::Mmio(Arc::new(MmioWindow::new(
                Arc::clone(&bar),
                base,
                size,
                Arc::clone(shared),
            ))))
        };
        match kind {
            MapKind::FmaUserPage | MapKind::FmaPutWc | MapKind::FmaGet | MapKind::FmaPutUc => {
                let f = lookup(&mut st.fmas, client, Object::Fma, index)?;
                let pages = hw::fma_pages(index).ok_or(KgniError::NoSuchHandle {
                    kind: Object::Fma,
                    handle: u64::from(index),
                })?;
                Ok(match kind {
                    MapKind::FmaUserPage => window(pages.user_page, 4096, &f.map),
                    MapKind::FmaPutWc => window(pages.put_wc, f.window, &f.map),
                    MapKind::FmaGet => window(pages.get, f.window, &f.map),
                    _ => window(pages.put_uc, f.window, &f.map),
                })
            }
            MapKind::CqAlias => {
                let c = lookup(&mut st.cqs, client, Object::Cq, index)?;
                let page = hw::cq_user_page(index).ok_or(KgniError::NoSuchHandle {
                    kind: Object::Cq,
                    handle: u64::from(index),
                })?;
                Ok(window(page, 4096, &c.map))
            }
            MapKind::CqRing => {
                let c = lookup(&mut st.cqs, client, Object::Cq, index)?;
                Ok(Response::Mapping(Mapping::Memory(MemWindow::new(
                    Arc::clone(&c.ring),
                    0,
                    u64::from(c.ring_entries) * 8,
                    Arc::clone(&c.map),
                ))))
            }
        }
    }
}
