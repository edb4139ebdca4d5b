//! What the kernel's integration tests share.

use drum_model::{Machine, PowerConfig, static_powers};
use hier_part::Plan;

/// A switch over one single-processor node per entry of `mflops`, split with `lbm`, and its
/// plan with static powers (in proportion to `mflops`).
pub fn flat_plan(mflops: &[f64], lbm: &str) -> Plan {
    let mut xml = format!(
        r#"<machinemodel><node type="NETWORK" nodenum="0" name="sw" parent="-1"><lbmethod lbm="{lbm}"/></node>"#
    );
    for (k, m) in mflops.iter().enumerate() {
        xml.push_str(&format!(
            r#"<node type="SINGLE_COMPUTING" nodenum="{}" name="n{k}" parent="0" mflops="{m}"/>"#,
            k + 1
        ));
    }
    xml.push_str("</machinemodel>");
    let m = Machine::parse_str(&xml, "test.xml").unwrap();
    Plan::new(&m, &static_powers(&m, &PowerConfig::default()).unwrap()).unwrap()
}
