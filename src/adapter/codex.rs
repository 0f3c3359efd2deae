//! placeholder
pub struct CodexAdapter;
impl super::Adapter for CodexAdapter {
    fn kind(&self) -> crate::spec::AgentKind { crate::spec::AgentKind::Command }
    fn binary(&self) -> Option<&'static str> { None }
    fn install_hint(&self) -> &'static str { "" }
    fn launch(&self, p: &str, t: &crate::spec::TaskSpec, c: &super::ArgvContext<'_>) -> super::AgentLaunch { super::CommandAdapter.launch(p, t, c) }
    fn parser(&self) -> Box<dyn super::StreamParser> { super::CommandAdapter.parser() }
    fn expects_terminal_event(&self) -> bool { false }
}
