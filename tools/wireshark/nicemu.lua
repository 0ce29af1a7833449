-- Wireshark dissector for nicemu fabric traces (`nicemu trace`, docs/trace.md).
--
-- A trace uses link type LINKTYPE_USER0 (147, WTAP_ENCAP_USER0). Every packet is a
-- 16-byte pseudo-header followed by the frame as the emulated NIC built it:
--
--   0      version (1)
--   1      family: 1 = Cassini, 2 = Gemini
--   2      traffic class
--   3      flags (0)
--   4..8   source fabric port (big-endian)
--   8..12  destination fabric port
--   12..16 CRC32 of the frame
--
-- Cassini frames: 20-byte fabric header (c_port_fab_hdr shape), then a request,
-- small-message, continuation or response header, the payload, and the 20-byte PCT tag at
-- the end (crates/emu-cassini/src/wire.rs and pct.rs). Gemini frames: a 48-byte
-- little-endian header and the payload (crates/emu-gemini/src/packet.rs).
--
-- Usage: tshark -X lua_script:tools/wireshark/nicemu.lua -r trace.pcapng -V

local nicemu = Proto("nicemu", "nicemu fabric packet")
local cxi = Proto("nicemu_cxi", "nicemu Cassini frame")
local gni = Proto("nicemu_gni", "nicemu Gemini frame")

local families = { [1] = "Cassini", [2] = "Gemini" }

local hf = {
  version = ProtoField.uint8("nicemu.version", "Pseudo-header version", base.DEC),
  family = ProtoField.uint8("nicemu.family", "NIC family", base.DEC, families),
  tc = ProtoField.uint8("nicemu.tc", "Traffic class", base.DEC),
  flags = ProtoField.uint8("nicemu.flags", "Flags", base.HEX),
  src = ProtoField.uint32("nicemu.src", "Source port", base.DEC),
  dst = ProtoField.uint32("nicemu.dst", "Destination port", base.DEC),
  crc = ProtoField.uint32("nicemu.crc", "Frame CRC32", base.HEX),
}
nicemu.fields = { hf.version, hf.family, hf.tc, hf.flags, hf.src, hf.dst, hf.crc }

-- Cassini -----------------------------------------------------------------------------

-- c_dma_op (firmware-spec cassini::cmd::DmaOp)
local dma_ops = {
  [0] = "NOOP", [1] = "PUT", [2] = "GET", [3] = "RENDEZVOUS_PUT", [4] = "ATOMIC",
  [5] = "FETCHING_ATOMIC", [6] = "ETHERNET_TX", [7] = "SMALL_MESSAGE", [8] = "NOMATCH_PUT",
  [9] = "NOMATCH_GET", [10] = "CSTATE", [11] = "CLOSE", [12] = "CLEAR", [13] = "REDUCTION",
}
local pkt_types = { [0] = "UNRESTRICTED", [1] = "SMALLMSG", [2] = "CONTINUATION" }
local rsp_kinds = { [1] = "ACK", [2] = "REPLY" }

local cf = {
  ver = ProtoField.uint8("nicemu.cxi.ver", "Fabric header version", base.DEC, nil, 0xF0),
  total = ProtoField.uint16("nicemu.cxi.total_len", "Total length", base.DEC),
  vni = ProtoField.uint16("nicemu.cxi.vni", "VNI", base.DEC),
  ttl = ProtoField.uint8("nicemu.cxi.ttl", "TTL", base.DEC),
  sfa = ProtoField.uint32("nicemu.cxi.sfa", "Source fabric address", base.HEX),
  dfa = ProtoField.uint32("nicemu.cxi.dfa", "Destination fabric address", base.HEX),
  snid = ProtoField.uint32("nicemu.cxi.src_nid", "Source NID", base.DEC),
  dnid = ProtoField.uint32("nicemu.cxi.dst_nid", "Destination NID", base.DEC),
  kind = ProtoField.string("nicemu.cxi.kind", "Packet kind"),
  req = ProtoField.bool("nicemu.cxi.req", "Request", 8, nil, 0x80),
  pkt_type = ProtoField.uint8("nicemu.cxi.pkt_type", "Packet type", base.DEC, pkt_types, 0x70),
  opcode = ProtoField.uint8("nicemu.cxi.opcode", "Opcode", base.DEC, dma_ops, 0x0F),
  rsp = ProtoField.uint8("nicemu.cxi.rsp_kind", "Response kind", base.DEC, rsp_kinds, 0x0F),
  index_ext = ProtoField.uint8("nicemu.cxi.index_ext", "index_ext", base.DEC, nil, 0x1F),
  restricted = ProtoField.bool("nicemu.cxi.restricted", "Restricted", 8, nil, 0x20),
  remote_offset = ProtoField.uint64("nicemu.cxi.remote_offset", "Remote offset", base.HEX),
  request_len = ProtoField.uint32("nicemu.cxi.request_len", "Request length", base.DEC),
  initiator = ProtoField.uint32("nicemu.cxi.initiator", "Initiator", base.HEX),
  match_bits = ProtoField.uint64("nicemu.cxi.match_bits", "Match bits", base.HEX),
  header_data = ProtoField.uint64("nicemu.cxi.header_data", "Header data", base.HEX),
  handle = ProtoField.uint32("nicemu.cxi.handle", "Request handle", base.HEX),
  eager_len = ProtoField.uint32("nicemu.cxi.eager_len", "Rendezvous eager length", base.DEC),
  rdzv_id = ProtoField.uint8("nicemu.cxi.rendezvous_id", "Rendezvous id", base.DEC),
  use_off = ProtoField.bool("nicemu.cxi.use_offset_for_get", "use_offset_for_get"),
  offset = ProtoField.uint32("nicemu.cxi.offset", "Offset", base.DEC),
  eom = ProtoField.bool("nicemu.cxi.eom", "End of message"),
  seg_len = ProtoField.uint16("nicemu.cxi.seg_len", "Segment length", base.DEC),
  rc = ProtoField.uint8("nicemu.cxi.rc", "Return code", base.DEC, nil, 0x3F),
  ptl_list = ProtoField.uint8("nicemu.cxi.ptl_list", "Portals list", base.DEC, nil, 0xC0),
  mlength = ProtoField.uint32("nicemu.cxi.mlength", "Matched length", base.DEC),
  amo_op = ProtoField.uint8("nicemu.cxi.amo_op", "AMO op", base.DEC),
  amo_type = ProtoField.uint8("nicemu.cxi.amo_type", "AMO type", base.DEC),
  amo_cswap = ProtoField.uint8("nicemu.cxi.amo_cswap", "AMO cswap op", base.DEC),
  amo_op1 = ProtoField.bytes("nicemu.cxi.amo_op1", "AMO operand 1"),
  amo_op2 = ProtoField.bytes("nicemu.cxi.amo_op2", "AMO operand 2"),
  payload = ProtoField.bytes("nicemu.cxi.payload", "Payload"),
  tag_flags = ProtoField.uint8("nicemu.cxi.pct.flags", "PCT flags", base.HEX),
  tag_seqd = ProtoField.bool("nicemu.cxi.pct.sequenced", "Sequenced", 8, nil, 0x01),
  tag_ack = ProtoField.bool("nicemu.cxi.pct.ack", "Carries ACK", 8, nil, 0x02),
  tag_nack = ProtoField.bool("nicemu.cxi.pct.nack", "NACK", 8, nil, 0x04),
  tag_conn = ProtoField.bool("nicemu.cxi.pct.conn", "Connection management only", 8, nil, 0x08),
  tries = ProtoField.uint8("nicemu.cxi.pct.tries", "Transmission", base.DEC),
  epoch = ProtoField.uint32("nicemu.cxi.pct.epoch", "Epoch", base.DEC),
  seq = ProtoField.uint32("nicemu.cxi.pct.seq", "Sequence number", base.DEC),
  ack_epoch = ProtoField.uint32("nicemu.cxi.pct.ack_epoch", "ACK epoch", base.DEC),
  ack = ProtoField.uint32("nicemu.cxi.pct.ack_seq", "ACK (next expected)", base.DEC),
}
do
  local l = {}
  for _, v in pairs(cf) do l[#l + 1] = v end
  cxi.fields = l
end

local FAB_HDR, TAG = 20, 20

-- Connection fields (5 bytes at `r`): seq_num (12 bits), clr_seq_num, sct_idx (12 bits) and
-- a 4-bit field; the request handle is sct_idx | (seq_num & 0xFF) << 12.
local function conn(r)
  local seq = r(0, 1):uint() * 16 + math.floor(r(1, 1):uint() / 16)
  local sct = r(3, 1):uint() * 16 + math.floor(r(4, 1):uint() / 16)
  local nibble = r(4, 1):uint() % 16
  return sct + (seq % 256) * 4096, nibble
end

local function cxi_tag(tree, t)
  local st = tree:add(cxi, t, "PCT tag")
  st:add(cf.tag_flags, t(0, 1))
  st:add(cf.tag_seqd, t(0, 1))
  st:add(cf.tag_ack, t(0, 1))
  st:add(cf.tag_nack, t(0, 1))
  st:add(cf.tag_conn, t(0, 1))
  st:add(cf.tries, t(1, 1))
  st:add(cf.epoch, t(4, 4))
  st:add(cf.seq, t(8, 4))
  st:add(cf.ack_epoch, t(12, 4))
  st:add(cf.ack, t(16, 4))
end

function cxi.dissector(tvb, pinfo, tree)
  local len = tvb:len()
  local t = tree:add(cxi, tvb(), "nicemu Cassini frame")
  if len < FAB_HDR + TAG then
    t:add_expert_info(PI_MALFORMED, PI_ERROR, "frame shorter than fabric header + PCT tag")
    return
  end
  local fh = t:add(cxi, tvb(0, FAB_HDR), "Fabric header")
  fh:add(cf.ver, tvb(0, 1))
  fh:add(cf.total, tvb(2, 2))
  fh:add(cf.vni, tvb(4, 2))
  fh:add(cf.ttl, tvb(8, 1))
  fh:add(cf.sfa, tvb(12, 4))
  fh:add(cf.snid, tvb(12, 4), math.floor(tvb(12, 4):uint() / 4096))
  fh:add(cf.dfa, tvb(16, 4))
  fh:add(cf.dnid, tvb(16, 4), math.floor(tvb(16, 4):uint() / 4096))
  local body_end = len - TAG
  local flags, seq = tvb(body_end, 1):uint(), tvb(body_end + 8, 4):uint()
  local info
  if body_end == FAB_HDR then
    t:add(cf.kind, tvb(0, 0), "PCT connection frame")
    if flags % 8 >= 4 then info = "PCT NACK" else info = "PCT ACK" end
  else
    local h = tvb(FAB_HDR, body_end - FAB_HDR)
    local b0 = h(0, 1):uint()
    local opcode, ty, req = b0 % 16, math.floor(b0 / 16) % 8, b0 >= 128
    local ph = t:add(cxi, h, "Packet header")
    ph:add(cf.req, h(0, 1))
    if not req then
      ph:add(cf.kind, h(0, 0), "response")
      ph:add(cf.rsp, h(0, 1))
      ph:add(cf.rc, h(1, 1))
      ph:add(cf.ptl_list, h(1, 1))
      ph:add(cf.offset, h(2, 4))
      ph:add(cf.eom, h(6, 1), h(6, 1):uint() % 2 == 1)
      ph:add(cf.handle, h(7, 3), h(7, 3):uint())
      ph:add(cf.mlength, h(10, 4))
      ph:add(cf.seg_len, h(14, 2))
      local n = h(14, 2):uint()
      if n > 0 and h:len() >= 16 + n then ph:add(cf.payload, h(16, n)) end
      info = string.format("%s rc=%d handle=0x%x offset=%d mlength=%d",
        rsp_kinds[opcode] or "RSP?", h(1, 1):uint() % 64, h(7, 3):uint(), h(2, 4):uint(),
        h(10, 4):uint())
    else
      ph:add(cf.pkt_type, h(0, 1))
      if ty ~= 2 then ph:add(cf.opcode, h(0, 1)) end
      if ty == 0 then
        ph:add(cf.kind, h(0, 0), "request (unrestricted)")
        ph:add(cf.index_ext, h(1, 1))
        ph:add(cf.restricted, h(1, 1))
        ph:add(cf.remote_offset, h(2, 7), UInt64.fromhex("00" .. tostring(h(2, 7):bytes())))
        local handle, rid_hi = conn(h(10, 5))
        ph:add(cf.handle, h(10, 5), handle)
        ph:add(cf.request_len, h(16, 4))
        ph:add(cf.initiator, h(20, 4))
        ph:add(cf.match_bits, h(24, 8))
        ph:add(cf.header_data, h(32, 8))
        if opcode == 3 then
          local eg = h(40, 1):uint() * 4096 + h(41, 1):uint() * 16 + math.floor(h(42, 1):uint() / 16)
          ph:add(cf.eager_len, h(40, 3), eg)
          ph:add(cf.rdzv_id, h(14, 2), rid_hi * 16 + math.floor(h(15, 1):uint() / 16))
          ph:add(cf.use_off, h(15, 1), math.floor(h(15, 1):uint() / 4) % 2 == 1)
        end
        local at = 43
        if (opcode == 4 or opcode == 5) and h:len() >= at + 40 then
          local a = ph:add(cxi, h(at, 40), "AMO descriptor")
          a:add(cf.amo_op, h(at, 1))
          a:add(cf.amo_type, h(at + 1, 1))
          a:add(cf.amo_cswap, h(at + 2, 1))
          a:add(cf.amo_op1, h(at + 8, 16))
          a:add(cf.amo_op2, h(at + 24, 16))
          at = at + 40
        end
        if h:len() > at then ph:add(cf.payload, h(at, h:len() - at)) end
        info = string.format("%s len=%d match=0x%s handle=0x%x", dma_ops[opcode] or "OP?",
          h(16, 4):uint(), h(24, 8):uint64():tohex(), handle)
      elseif ty == 1 then
        ph:add(cf.kind, h(0, 0), "request (small message)")
        ph:add(cf.index_ext, h(1, 1))
        ph:add(cf.restricted, h(1, 1))
        ph:add(cf.header_data, h(2, 8))
        local handle, hi = conn(h(10, 5))
        ph:add(cf.handle, h(10, 5), handle)
        local n = hi * 256 + h(15, 1):uint()
        ph:add(cf.request_len, h(14, 2), n)
        ph:add(cf.initiator, h(16, 4))
        ph:add(cf.match_bits, h(20, 8))
        if h:len() > 29 then ph:add(cf.payload, h(29, h:len() - 29)) end
        info = string.format("%s (IDC) len=%d match=0x%s handle=0x%x", dma_ops[opcode] or "OP?",
          n, h(20, 8):uint64():tohex(), handle)
      elseif ty == 2 then
        ph:add(cf.kind, h(0, 0), "continuation")
        ph:add(cf.eom, h(1, 1), math.floor(h(1, 1):uint() / 16) % 2 == 1)
        ph:add(cf.offset, h(2, 4))
        local handle, hi = conn(h(7, 5))
        ph:add(cf.handle, h(7, 5), handle)
        ph:add(cf.seg_len, h(11, 2), hi * 256 + h(12, 1):uint())
        if h:len() > 13 then ph:add(cf.payload, h(13, h:len() - 13)) end
        info = string.format("CONTINUATION offset=%d handle=0x%x", h(2, 4):uint(), handle)
      else
        ph:add_expert_info(PI_MALFORMED, PI_WARN, "unknown packet type " .. ty)
        info = "unknown packet type"
      end
    end
  end
  cxi_tag(t, tvb(body_end, TAG))
  if flags % 2 == 1 then info = info .. string.format(" seq=%d", seq) end
  pinfo.cols.info:append(" " .. info)
end

-- Gemini ------------------------------------------------------------------------------

local gni_kinds = {
  [1] = "PUT", [2] = "GET_REQ", [3] = "GET_RESP", [4] = "AMO_REQ", [5] = "AMO_RESP",
  [6] = "ACK", [7] = "CQ_WRITE", [8] = "REMOTE_EVENT", [9] = "SEND",
}
local gf = {
  kind = ProtoField.uint8("nicemu.gni.kind", "Kind", base.DEC, gni_kinds),
  flags = ProtoField.uint8("nicemu.gni.flags", "Flags", base.HEX),
  ordered = ProtoField.bool("nicemu.gni.ordered", "Ordered", 8, nil, 0x01),
  vmdh = ProtoField.bool("nicemu.gni.vmdh", "Virtual MDH", 8, nil, 0x02),
  immed = ProtoField.bool("nicemu.gni.immed", "Immediate", 8, nil, 0x04),
  overrun = ProtoField.bool("nicemu.gni.rem_overrun", "Remote overrun", 8, nil, 0x08),
  msg = ProtoField.bool("nicemu.gni.msg", "Message", 8, nil, 0x10),
  status = ProtoField.uint8("nicemu.gni.status", "Status", base.DEC),
  ptag = ProtoField.uint8("nicemu.gni.ptag", "ptag", base.DEC),
  tag = ProtoField.uint32("nicemu.gni.tag", "Request tag", base.HEX),
  seq = ProtoField.uint32("nicemu.gni.seq", "Sequence number", base.DEC),
  stream = ProtoField.uint16("nicemu.gni.stream", "Stream", base.HEX),
  mdh = ProtoField.uint16("nicemu.gni.mdh", "MDH", base.DEC),
  cmd = ProtoField.uint16("nicemu.gni.cmd", "Command", base.HEX),
  len = ProtoField.uint32("nicemu.gni.len", "Length", base.DEC),
  offset = ProtoField.uint64("nicemu.gni.offset", "Offset", base.HEX),
  op1 = ProtoField.uint64("nicemu.gni.op1", "Operand 1", base.HEX),
  op2 = ProtoField.uint64("nicemu.gni.op2", "Operand 2", base.HEX),
  payload = ProtoField.bytes("nicemu.gni.payload", "Payload"),
}
do
  local l = {}
  for _, v in pairs(gf) do l[#l + 1] = v end
  gni.fields = l
end

function gni.dissector(tvb, pinfo, tree)
  local t = tree:add(gni, tvb(), "nicemu Gemini frame")
  if tvb:len() < 48 then
    t:add_expert_info(PI_MALFORMED, PI_ERROR, "frame shorter than the 48-byte header")
    return
  end
  t:add(gf.kind, tvb(0, 1))
  t:add(gf.flags, tvb(1, 1))
  t:add(gf.ordered, tvb(1, 1))
  t:add(gf.vmdh, tvb(1, 1))
  t:add(gf.immed, tvb(1, 1))
  t:add(gf.overrun, tvb(1, 1))
  t:add(gf.msg, tvb(1, 1))
  t:add(gf.status, tvb(2, 1))
  t:add(gf.ptag, tvb(3, 1))
  t:add_le(gf.tag, tvb(4, 4))
  t:add_le(gf.seq, tvb(8, 4))
  local stream = tvb(12, 2):le_uint()
  local si = t:add_le(gf.stream, tvb(12, 2))
  if stream >= 0x100 then si:append_text(string.format(" (BTE channel %d)", stream - 0x100))
  else si:append_text(string.format(" (FMA descriptor %d)", stream)) end
  t:add_le(gf.mdh, tvb(14, 2))
  t:add_le(gf.cmd, tvb(16, 2))
  t:add_le(gf.len, tvb(20, 4))
  t:add_le(gf.offset, tvb(24, 8))
  t:add_le(gf.op1, tvb(32, 8))
  t:add_le(gf.op2, tvb(40, 8))
  if tvb:len() > 48 then t:add(gf.payload, tvb(48, tvb:len() - 48)) end
  local kind = tvb(0, 1):uint()
  pinfo.cols.info:append(string.format(" %s tag=0x%x mdh=%d offset=0x%s bytes=%d",
    gni_kinds[kind] or "KIND?", tvb(4, 4):le_uint(), tvb(14, 2):le_uint(),
    tvb(24, 8):le_uint64():tohex(), tvb:len() - 48))
end

-- Pseudo-header -----------------------------------------------------------------------

function nicemu.dissector(tvb, pinfo, tree)
  if tvb:len() < 16 then return 0 end
  pinfo.cols.protocol = "nicemu"
  local family = tvb(1, 1):uint()
  local src, dst = tvb(4, 4):uint(), tvb(8, 4):uint()
  pinfo.cols.src = "port " .. src
  pinfo.cols.dst = "port " .. dst
  local t = tree:add(nicemu, tvb(0, 16), "nicemu fabric pseudo-header")
  t:add(hf.version, tvb(0, 1))
  t:add(hf.family, tvb(1, 1))
  t:add(hf.tc, tvb(2, 1))
  t:add(hf.flags, tvb(3, 1))
  t:add(hf.src, tvb(4, 4))
  t:add(hf.dst, tvb(8, 4))
  t:add(hf.crc, tvb(12, 4))
  pinfo.cols.info = string.format("%s tc=%d", families[family] or "?", tvb(2, 1):uint())
  local frame = tvb(16):tvb()
  if family == 1 then
    pinfo.cols.protocol = "nicemu-cxi"
    cxi.dissector(frame, pinfo, tree)
  elseif family == 2 then
    pinfo.cols.protocol = "nicemu-gni"
    gni.dissector(frame, pinfo, tree)
  end
  return tvb:len()
end

local encaps = wtap_encaps or wtap
DissectorTable.get("wtap_encap"):add(encaps.USER0, nicemu)
