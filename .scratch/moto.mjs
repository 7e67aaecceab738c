import { spawn } from 'node:child_process';
import { EC2Client, RunInstancesCommand, DescribeInstancesCommand, TerminateInstancesCommand, DescribeImagesCommand, DescribeSubnetsCommand } from '@aws-sdk/client-ec2';
const port = 5055;
const p = spawn('.ci/moto/bin/moto_server', ['-H','127.0.0.1','-p',String(port)], {stdio:['ignore','pipe','pipe']});
let t0=Date.now();
for(;;){ try { await fetch(`http://127.0.0.1:${port}/`); break;} catch { await new Promise(r=>setTimeout(r,100)); } }
console.log('moto up in', Date.now()-t0);
const c = new EC2Client({ region:'us-east-1', endpoint:`http://127.0.0.1:${port}`, credentials:{accessKeyId:'x',secretAccessKey:'y'}});
const imgs = await c.send(new DescribeImagesCommand({}));
console.log('images', imgs.Images.length, imgs.Images[0].ImageId);
const subs = await c.send(new DescribeSubnetsCommand({}));
console.log('subnets', subs.Subnets.map(s=>[s.SubnetId,s.AvailabilityZone]));
const r = await c.send(new RunInstancesCommand({ImageId: imgs.Images[0].ImageId, MinCount:1, MaxCount:1, InstanceType:'t3.micro', ClientToken:'abc', TagSpecifications:[{ResourceType:'instance', Tags:[{Key:'proxy-operator-managed',Value:'true'},{Key:'Name',Value:'n1'}]}], UserData: Buffer.from('#cloud-config').toString('base64')}));
console.log(JSON.stringify(r.Instances[0], null, 0).slice(0,800));
try { await c.send(new RunInstancesCommand({ImageId: 'ami-nope', MinCount:1, MaxCount:1})); } catch(e) { console.log('badami', e.name, e.$metadata?.httpStatusCode, e.message); }
try { await c.send(new RunInstancesCommand({ImageId: imgs.Images[0].ImageId, MinCount:1, MaxCount:1, SubnetId:'subnet-nope'})); } catch(e) { console.log('badsubnet', e.name, e.$metadata?.httpStatusCode, e.message); }
try { await c.send(new DescribeInstancesCommand({InstanceIds:['i-0123456789abcdef0']})); } catch(e) { console.log('nf', e.name, e.$metadata?.httpStatusCode); }
try { await c.send(new DescribeInstancesCommand({InstanceIds:['bogus']})); } catch(e) { console.log('malformed', e.name, e.$metadata?.httpStatusCode); }
try { await c.send(new TerminateInstancesCommand({InstanceIds:['i-0123456789abcdef0']})); } catch(e) { console.log('term nf', e.name, e.$metadata?.httpStatusCode); }
const d = await c.send(new DescribeInstancesCommand({Filters:[{Name:'tag:proxy-operator-managed', Values:['true']}]}));
console.log('desc', d.Reservations.flatMap(x=>x.Instances).map(i=>[i.InstanceId,i.State.Name,i.LaunchTime, i.PublicIpAddress]));
const ac = new AbortController(); setTimeout(()=>ac.abort(), 5);
try { await c.send(new DescribeInstancesCommand({}), {abortSignal: ac.signal}); console.log('not aborted'); } catch(e) { console.log('abort', e.name, e.message); }
await c.send(new TerminateInstancesCommand({InstanceIds:[r.Instances[0].InstanceId]}));
const d2 = await c.send(new DescribeInstancesCommand({InstanceIds:[r.Instances[0].InstanceId]}));
console.log('after term', d2.Reservations.flatMap(x=>x.Instances).map(i=>[i.InstanceId,i.State.Name]));
await c.send(new TerminateInstancesCommand({InstanceIds:[r.Instances[0].InstanceId]})); console.log('term again ok');
p.kill();
