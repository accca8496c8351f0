/* numa.h — the machine's NUMA layout as Linux shows it in sysfs (numa.c): how many nodes, which
 * CPUs a node has, and which node a PCI device (a GPU) sits on. */
#ifndef SP_IO_NUMA_H
#define SP_IO_NUMA_H

/* Online NUMA nodes (1 where sysfs does not say). */
int sp_numa_nodes(void);

/* Keep the calling thread, and the threads it starts from now on, on the CPUs of node `node`;
 * 0, or -1 when there is no such node or the CPUs could not be set. */
int sp_numa_bind_thread(int node);

/* The node of the PCI device at `bus_id` ("0000:3b:00.0", any case), or -1 when unknown. */
int sp_numa_pci_node(const char *bus_id);

#endif
