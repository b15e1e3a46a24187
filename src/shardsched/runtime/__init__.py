"""What every long-running process shares: metrics, logging, and the lifeline that takes
a process's children down with it."""
